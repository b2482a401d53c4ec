// Package relaymigrate applies embedded, versioned migrations per line. A line
// is an independent chain of versions owned by one part of the system: the
// engine has the line "engine"; each app adds its own ("msgx", "sms",
// "shipsync"). Files are named NNN_name.up.sql inside the line's folder;
// released files are never edited, only new versions added.
package relaymigrate

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// EngineLine is the name of the engine's own migration line.
const EngineLine = "engine"

// Line is one migration chain: its name and a file system holding
// <Name>/NNN_name.up.sql files.
type Line struct {
	Name string
	FS   fs.FS
}

// Migration is one parsed migration file.
type Migration struct {
	Line    string
	Version int
	Name    string
	SQL     string
}

var fileRE = regexp.MustCompile(`^(\d{3,})_([a-z0-9_]+)\.up\.sql$`)

// Load parses a line's files, checking that versions start at 1 and have no gaps
// or duplicates.
func Load(line Line) ([]Migration, error) {
	entries, err := fs.ReadDir(line.FS, line.Name)
	if err != nil {
		return nil, fmt.Errorf("relaymigrate: line %q: %w", line.Name, err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("relaymigrate: line %q: file %q is not NNN_name.up.sql", line.Name, e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(line.FS, path.Join(line.Name, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("relaymigrate: line %q: read %s: %w", line.Name, e.Name(), err)
		}
		out = append(out, Migration{Line: line.Name, Version: v, Name: m[2], SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("relaymigrate: line %q: expected version %d, found %03d_%s (versions must run 1, 2, 3 … without gaps or duplicates)", line.Name, i+1, m.Version, m.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("relaymigrate: line %q has no migrations", line.Name)
	}
	return out, nil
}

// EngineLineOf returns the engine line embedded in the driver.
func EngineLineOf(d relaydriver.Driver) Line { return Line{Name: EngineLine, FS: d.MigrationFS()} }

// UpResult reports what Up applied.
type UpResult struct {
	Applied []Migration
}

// Up applies every pending migration of each line in order. The clock stamps the
// version rows. Safe to run repeatedly; a version already applied is skipped.
func Up(ctx context.Context, d relaydriver.Driver, clock relaytype.Clock, lines ...Line) (*UpResult, error) {
	res := &UpResult{}
	for _, line := range lines {
		migs, err := Load(line)
		if err != nil {
			return res, err
		}
		applied, err := d.Migrator().AppliedVersions(ctx, line.Name)
		if err != nil {
			return res, fmt.Errorf("relaymigrate: line %q: read versions: %w", line.Name, err)
		}
		done := make(map[int]bool, len(applied))
		for _, v := range applied {
			done[v] = true
		}
		for _, m := range migs {
			if done[m.Version] {
				continue
			}
			if err := d.Migrator().Apply(ctx, m.Line, m.Version, m.Name, m.SQL, clock.Now()); err != nil {
				return res, fmt.Errorf("relaymigrate: apply %s/%03d_%s: %w", m.Line, m.Version, m.Name, err)
			}
			res.Applied = append(res.Applied, m)
		}
	}
	return res, nil
}

// Check returns an error wrapping relaytype.ErrSchemaOutdated when any line has
// a version the database has not applied, so a service refuses to start on an
// old schema. A database ahead of the binary (newer versions applied) is
// accepted: migrations are additive.
func Check(ctx context.Context, d relaydriver.Driver, lines ...Line) error {
	for _, line := range lines {
		migs, err := Load(line)
		if err != nil {
			return err
		}
		applied, err := d.Migrator().AppliedVersions(ctx, line.Name)
		if err != nil {
			return fmt.Errorf("relaymigrate: line %q: read versions: %w", line.Name, err)
		}
		done := make(map[int]bool, len(applied))
		for _, v := range applied {
			done[v] = true
		}
		for _, m := range migs {
			if !done[m.Version] {
				return fmt.Errorf("line %q lacks version %03d_%s: %w", line.Name, m.Version, m.Name, relaytype.ErrSchemaOutdated)
			}
		}
	}
	return nil
}
