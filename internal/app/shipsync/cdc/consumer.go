package cdc

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupOpts are the options of a consumer group that reads every CDC topic
// whose name starts with topicPrefix (topics created later too: the pattern
// is matched again at each metadata refresh, at least every 10 s), from the
// start of any partition the group has not committed, and commits only when
// its owner says so — after it has stored what it read. The ship client and
// the shore's CDC consumer both read this way.
func GroupOpts(brokers []string, group, topicPrefix string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics("^" + regexp.QuoteMeta(topicPrefix) + ".+"),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(time.Second),
		kgo.MetadataMaxAge(10 * time.Second),
	}
}
