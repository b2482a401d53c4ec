package relaysource

import (
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

// This file is the one place where SQLTable's SQL text is built.
//
// The queries are text/template templates filled with identifiers that were
// validated (letters, digits and underscore; see identRE) and then quoted for the
// dialect, so no caller-supplied text reaches the SQL unchecked. Values (the
// lower id bound and the limit) are always bind parameters; both dialects use
// "?" placeholders.
//
// readAfterTemplate is the intake's one fast path (seed 000 §4.2):
//
//	SELECT <id>[, <key>][, <payload>][, <received_at>] FROM <table>
//	WHERE <id> > ? ORDER BY <id> ASC LIMIT ?
//
// It has no predicate on a processing mark (seed 000 §4.1).
//
// boundsTemplate reads the id range for seeding and the lag metric:
//
//	SELECT MIN(<id>), MAX(<id>) FROM <table>
//
// markTemplate is acknowledgement write-back's one write (seed 000 §6.2),
// rendered only when MarkColumn is set; it never overwrites an existing mark:
//
//	UPDATE <table> SET <mark> = ?[, <mark_time> = ?] WHERE <id> = ?
//	AND (<mark> IS NULL OR <mark> = '')
//
// existsTemplate tells an already marked row from a missing one when the
// UPDATE changed nothing:
//
//	SELECT EXISTS (SELECT 1 FROM <table> WHERE <id> = ?)
var (
	readAfterTemplate = template.Must(template.New("read_after").Parse(
		`SELECT {{.ID}}{{range .Extra}}, {{.}}{{end}} FROM {{.Table}} WHERE {{.ID}} > ? ORDER BY {{.ID}} ASC LIMIT ?`))
	boundsTemplate = template.Must(template.New("bounds").Parse(
		`SELECT MIN({{.ID}}), MAX({{.ID}}) FROM {{.Table}}`))
	markTemplate = template.Must(template.New("mark").Parse(
		`UPDATE {{.Table}} SET {{.Mark}} = ?{{if .MarkTime}}, {{.MarkTime}} = ?{{end}} WHERE {{.ID}} = ? AND ({{.Mark}} IS NULL OR {{.Mark}} = '')`))
	existsTemplate = template.Must(template.New("exists").Parse(
		`SELECT EXISTS (SELECT 1 FROM {{.Table}} WHERE {{.ID}} = ?)`))
)

// identRE is what an identifier may look like: ASCII letters, digits and
// underscore, not starting with a digit, at most 64 characters (MySQL's limit).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// queryFields fills the templates with quoted identifiers.
type queryFields struct {
	Table string
	ID    string
	// Extra lists the optional columns in scan order: key, payload, received_at
	// (each only when configured).
	Extra []string
	// Mark and MarkTime are the acknowledgement columns (MarkTime optional).
	Mark     string
	MarkTime string
}

// sqlTableQueries is the SQL text of one configured SQLTable.
type sqlTableQueries struct {
	readAfter string
	bounds    string
	// mark and exists are empty when MarkColumn is not set.
	mark   string
	exists string
}

// quoteIdent validates name and quotes it for d.
func quoteIdent(d Dialect, field, name string) (string, error) {
	if !identRE.MatchString(name) {
		return "", fmt.Errorf("relaysource: %s %q is not a valid identifier (letters, digits and underscore, not starting with a digit, at most 64)", field, name)
	}
	switch d {
	case DialectMySQL:
		return "`" + name + "`", nil
	case DialectSQLite:
		return `"` + name + `"`, nil
	default:
		return "", fmt.Errorf("relaysource: Dialect %q is not one of %q, %q", d, DialectMySQL, DialectSQLite)
	}
}

// quoteTable validates and quotes a table name, which may be qualified by one
// schema (database) name: "mailbox.CMINMSGS".
func quoteTable(d Dialect, name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("relaysource: Table %q has more than one qualifier", name)
	}
	for i, p := range parts {
		q, err := quoteIdent(d, "Table", p)
		if err != nil {
			return "", err
		}
		parts[i] = q
	}
	return strings.Join(parts, "."), nil
}

// buildQueries validates cfg's identifiers and renders the queries.
func buildQueries(cfg *SQLTableConfig) (*sqlTableQueries, error) {
	table, err := quoteTable(cfg.Dialect, cfg.Table)
	if err != nil {
		return nil, err
	}
	f := queryFields{Table: table}
	if f.ID, err = quoteIdent(cfg.Dialect, "IDColumn", cfg.IDColumn); err != nil {
		return nil, err
	}
	for _, c := range []struct{ field, name string }{
		{"KeyColumn", cfg.KeyColumn},
		{"PayloadColumn", cfg.PayloadColumn},
		{"ReceivedAtColumn", cfg.ReceivedAtColumn},
	} {
		if c.name == "" {
			continue
		}
		q, err := quoteIdent(cfg.Dialect, c.field, c.name)
		if err != nil {
			return nil, err
		}
		f.Extra = append(f.Extra, q)
	}
	if cfg.MarkColumn != "" {
		if f.Mark, err = quoteIdent(cfg.Dialect, "MarkColumn", cfg.MarkColumn); err != nil {
			return nil, err
		}
	}
	if cfg.MarkTimeColumn != "" {
		if f.MarkTime, err = quoteIdent(cfg.Dialect, "MarkTimeColumn", cfg.MarkTimeColumn); err != nil {
			return nil, err
		}
	}
	var readAfter, bounds strings.Builder
	if err := readAfterTemplate.Execute(&readAfter, f); err != nil {
		return nil, fmt.Errorf("relaysource: render read query: %w", err)
	}
	if err := boundsTemplate.Execute(&bounds, f); err != nil {
		return nil, fmt.Errorf("relaysource: render bounds query: %w", err)
	}
	q := &sqlTableQueries{readAfter: readAfter.String(), bounds: bounds.String()}
	if f.Mark != "" {
		var mark, exists strings.Builder
		if err := markTemplate.Execute(&mark, f); err != nil {
			return nil, fmt.Errorf("relaysource: render mark statement: %w", err)
		}
		if err := existsTemplate.Execute(&exists, f); err != nil {
			return nil, fmt.Errorf("relaysource: render existence query: %w", err)
		}
		q.mark, q.exists = mark.String(), exists.String()
	}
	return q, nil
}
