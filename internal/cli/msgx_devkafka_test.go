package cli_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestMsgxRunDevKafka: `relay msgx run --dev-kafka PORT` runs without a Kafka
// broker of its own: a Kafka client finds both msgx topics on
// 127.0.0.1:PORT while it runs. Giving a broker list as well is refused.
func TestMsgxRunDevKafka(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	store := testdb.PGSchema(t)
	_, dsn := testdb.MariaDBWithDSN(t)
	out, err := run(t, "msgx", "mailbox", "create", "--mailbox", dsn)
	require.NoError(t, err, out)

	_, err = run(t, "msgx", "run", "--store", store, "--mailbox", dsn, "--dev-kafka", "1", "--kafka-brokers", "x:1")
	require.ErrorContains(t, err, "exclude each other")

	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	var runOut lockedBuffer
	go func() {
		runDone <- cli.Run(runCtx, []string{"msgx", "run", "--store", store, "--mailbox", dsn, "--dev-kafka", port,
			"--log-level", "info", "--param", "msgx.pipeline.cutover-watermark=zero"}, &runOut, &runOut)
	}()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer client.Close()
	var topics []string
	require.Eventually(t, func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
		if err != nil {
			return false
		}
		topics = topics[:0]
		for _, tp := range resp.Topics {
			if tp.Topic != nil {
				topics = append(topics, *tp.Topic)
			}
		}
		return slices.Contains(topics, "msgx.msg") && slices.Contains(topics, "msgx.schd")
	}, time.Minute, 50*time.Millisecond, "topics on the dev broker: %v", topics)
	require.Eventually(t, func() bool { return strings.Contains(runOut.String(), "msgx: starting") },
		time.Minute, 20*time.Millisecond, "the exchange starts on the dev broker")
	stop()
	require.NoError(t, <-runDone, runOut.String())
	require.Contains(t, runOut.String(), "development Kafka broker")
}
