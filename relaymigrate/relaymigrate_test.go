package relaymigrate_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaymigrate"
)

func line(files map[string]string) relaymigrate.Line {
	m := fstest.MapFS{}
	for name, body := range files {
		m["x/"+name] = &fstest.MapFile{Data: []byte(body)}
	}
	return relaymigrate.Line{Name: "x", FS: m}
}

func TestLoadOrdersVersions(t *testing.T) {
	t.Parallel()
	migs, err := relaymigrate.Load(line(map[string]string{
		"002_second.up.sql": "B", "001_first.up.sql": "A", "003_third.up.sql": "C"}))
	require.NoError(t, err)
	require.Len(t, migs, 3)
	for i, m := range migs {
		require.Equal(t, i+1, m.Version)
		require.Equal(t, "x", m.Line)
	}
	require.Equal(t, "first", migs[0].Name)
	require.Equal(t, "C", migs[2].SQL)
}

func TestLoadRejectsBadChains(t *testing.T) {
	t.Parallel()
	for name, files := range map[string]map[string]string{
		"gap":       {"001_a.up.sql": "A", "003_c.up.sql": "C"},
		"duplicate": {"001_a.up.sql": "A", "001_b.up.sql": "B"},
		"not one":   {"002_b.up.sql": "B"},
		"bad name":  {"001_a.sql": "A"},
		"empty":     {},
	} {
		_, err := relaymigrate.Load(line(files))
		require.Error(t, err, name)
	}
	_, err := relaymigrate.Load(relaymigrate.Line{Name: "missing", FS: fstest.MapFS{}})
	require.Error(t, err)
}
