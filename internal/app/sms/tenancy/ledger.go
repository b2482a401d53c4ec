package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/relaytype"
)

// Kind is the kind of a ledger entry.
type Kind string

// The kinds and what each does to an account (balance, frozen):
const (
	// KindTopup adds money: balance += amount.
	KindTopup Kind = "topup"
	// KindFreeze reserves money for a message in flight: frozen += amount;
	// refused with rules.ReasonInsufficientBalance when balance − frozen <
	// amount.
	KindFreeze Kind = "freeze"
	// KindRelease gives a reservation back (the message was not sent):
	// frozen −= amount.
	KindRelease Kind = "release"
	// KindCharge turns a reservation into a charge (the message was sent):
	// frozen −= amount, balance −= amount.
	KindCharge Kind = "charge"
	// KindRefund pays a charge back (the message failed for good after it was
	// charged): balance += amount.
	KindRefund Kind = "refund"
)

// ErrKeyReused is returned when an idempotency key is posted again with
// another account, kind or amount: a bug in the caller, never a duplicate.
var ErrKeyReused = errors.New("tenancy: ledger key reused for another entry")

// Entry is one change of an account.
type Entry struct {
	AccountID int64
	Kind      Kind
	// IdemKey is the business key of the change ("freeze:<message id>",
	// "charge:<submit id>", …), unique across the ledger: posting the same
	// key again returns the first entry and changes nothing.
	IdemKey string
	Amount  rules.Money // > 0
	// Note is a short, non-secret remark (no phone number, no content).
	Note string
	At   time.Time // the caller's clock
}

// Posted is what Post did.
type Posted struct {
	ID int64
	// Created is false when IdemKey was posted before (nothing changed).
	Created      bool
	BalanceAfter rules.Money
	FrozenAfter  rules.Money
}

// Post applies e to its account and appends it to the ledger, in tx (the
// caller's transaction: the entry commits with the business change it pays
// for). It locks the account row first (SELECT … FOR UPDATE), so entries of
// one account are serialised, then looks the key up: an existing entry with
// the same account, kind and amount is returned with Created false; one
// that differs is ErrKeyReused. A freeze beyond the available balance, or a
// release or charge beyond what is frozen, is refused (the first with
// rules.ReasonInsufficientBalance) and changes nothing. Keep the call at the
// end of the transaction: the account lock is held until it ends.
func Post(ctx context.Context, tx pgx.Tx, e Entry) (Posted, error) {
	if e.Amount < 1 {
		return Posted{}, fmt.Errorf("tenancy: post %s: amount %d li, must be positive", e.Kind, e.Amount)
	}
	if e.IdemKey == "" || len(e.IdemKey) > 200 {
		return Posted{}, fmt.Errorf("tenancy: post %s: idempotency key of %d bytes, want 1 to 200", e.Kind, len(e.IdemKey))
	}
	var balance, frozen int64
	err := tx.QueryRow(ctx, stmts["AccountLock"], e.AccountID).Scan(&balance, &frozen)
	if errors.Is(err, pgx.ErrNoRows) {
		return Posted{}, fmt.Errorf("tenancy: post %s: account %d: %w", e.Kind, e.AccountID, relaytype.ErrNotFound)
	}
	if err != nil {
		return Posted{}, fmt.Errorf("tenancy: post %s: lock account %d: %w", e.Kind, e.AccountID, err)
	}

	var prev struct {
		id, account, amount, balance, frozen int64
		kind                                 string
	}
	err = tx.QueryRow(ctx, stmts["LedgerByKey"], e.IdemKey).
		Scan(&prev.id, &prev.account, &prev.kind, &prev.amount, &prev.balance, &prev.frozen)
	switch {
	case err == nil:
		if prev.account != e.AccountID || prev.kind != string(e.Kind) || prev.amount != int64(e.Amount) {
			return Posted{}, fmt.Errorf("tenancy: post %s of %d li to account %d: %w (entry %d)", e.Kind, e.Amount,
				e.AccountID, ErrKeyReused, prev.id)
		}
		return Posted{ID: prev.id, BalanceAfter: rules.Money(prev.balance), FrozenAfter: rules.Money(prev.frozen)}, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return Posted{}, fmt.Errorf("tenancy: post %s: look up key: %w", e.Kind, err)
	}

	a := int64(e.Amount)
	balance, frozen, err = apply(e, balance, frozen)
	if err != nil {
		return Posted{}, err
	}
	var id int64
	if err := tx.QueryRow(ctx, stmts["LedgerInsert"], e.AccountID, string(e.Kind), e.IdemKey, a, balance, frozen,
		relaytype.BoundText(e.Note, 200), e.At).Scan(&id); err != nil {
		return Posted{}, fmt.Errorf("tenancy: post %s: insert: %w", e.Kind, err)
	}
	if _, err := tx.Exec(ctx, stmts["AccountSet"], e.AccountID, balance, frozen, e.At); err != nil {
		return Posted{}, fmt.Errorf("tenancy: post %s: update account: %w", e.Kind, err)
	}
	return Posted{ID: id, Created: true, BalanceAfter: rules.Money(balance), FrozenAfter: rules.Money(frozen)}, nil
}

// apply returns the account's balance and frozen amount after e, or why e
// is refused (a freeze beyond the available balance is a *rules.Error with
// rules.ReasonInsufficientBalance).
func apply(e Entry, balance, frozen int64) (int64, int64, error) {
	a := int64(e.Amount)
	switch e.Kind {
	case KindTopup, KindRefund:
		balance += a
	case KindFreeze:
		if balance-frozen < a {
			return 0, 0, &rules.Error{Reason: rules.ReasonInsufficientBalance,
				Detail: fmt.Sprintf("account %d: %s available, %s needed", e.AccountID, rules.Money(balance-frozen), e.Amount)}
		}
		frozen += a
	case KindRelease, KindCharge:
		if frozen < a {
			return 0, 0, fmt.Errorf("tenancy: post %s of %d li to account %d: only %d li frozen", e.Kind, a, e.AccountID, frozen)
		}
		frozen -= a
		if e.Kind == KindCharge {
			balance -= a
		}
	default:
		return 0, 0, fmt.Errorf("tenancy: post: unknown kind %s", relaytype.QuoteValue(string(e.Kind)))
	}
	return balance, frozen, nil
}

// PostResult is what PostMany did with one entry: Posted, or Refused (a
// *rules.Error, e.g. insufficient_balance) and nothing changed for it.
type PostResult struct {
	Posted
	Refused error
}

// PostMany posts es — entries of one account — in order, deciding each as
// Post would after the ones before it, in two round trips whatever their
// number: lock the account and look every key up (one pipelined batch), then
// insert the new entries and update the account (another). An entry refused by the rules of its kind (a freeze
// beyond the available balance) gets Refused and the rest go on; a key
// reused for another entry, a release or charge beyond what is frozen, or a
// store error fails the call (nothing is written by it then, so the caller
// rolls back). Like Post, it holds the account's lock to the end of tx:
// call it last.
func PostMany(ctx context.Context, tx pgx.Tx, es []Entry) ([]PostResult, error) {
	if len(es) == 0 {
		return nil, nil
	}
	account := es[0].AccountID
	keys := make([]string, len(es))
	for i, e := range es {
		switch {
		case e.AccountID != account:
			return nil, fmt.Errorf("tenancy: post many: entries of accounts %d and %d", account, e.AccountID)
		case e.Amount < 1:
			return nil, fmt.Errorf("tenancy: post %s: amount %d li, must be positive", e.Kind, e.Amount)
		case e.IdemKey == "" || len(e.IdemKey) > 200:
			return nil, fmt.Errorf("tenancy: post %s: idempotency key of %d bytes, want 1 to 200", e.Kind, len(e.IdemKey))
		}
		keys[i] = e.IdemKey
	}
	type prior struct {
		id, account, amount, balance, frozen int64
		kind                                 string
	}
	// The lock and the look-up go in one round trip; the look-up runs after
	// the lock is granted, so it sees every entry committed before.
	var balance, frozen int64
	prev := map[string]prior{}
	b := &pgx.Batch{}
	b.Queue(stmts["AccountLock"], account).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&balance, &frozen)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("tenancy: post many: account %d: %w", account, relaytype.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("tenancy: post many: lock account %d: %w", account, err)
		}
		return nil
	})
	b.Queue(stmts["LedgerByKeys"], keys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k string
			var p prior
			if err := rows.Scan(&p.id, &k, &p.account, &p.kind, &p.amount, &p.balance, &p.frozen); err != nil {
				return fmt.Errorf("tenancy: post many: look up keys: %w", err)
			}
			prev[k] = p
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("tenancy: post many: look up keys: %w", err)
		}
		return nil
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}

	out := make([]PostResult, len(es))
	var ins struct {
		idx                        []int
		kinds, keys, notes         []string
		amounts, balances, frozens []int64
		at                         []time.Time
	}
	fresh := map[string]int{} // a key new to the ledger, first posted by entry i of this call
	for i, e := range es {
		p, seen := prev[e.IdemKey]
		if j, ok := fresh[e.IdemKey]; ok {
			f := es[j]
			p, seen = prior{account: f.AccountID, kind: string(f.Kind), amount: int64(f.Amount),
				balance: int64(out[j].BalanceAfter), frozen: int64(out[j].FrozenAfter)}, true
		}
		if seen {
			if p.account != e.AccountID || p.kind != string(e.Kind) || p.amount != int64(e.Amount) {
				return nil, fmt.Errorf("tenancy: post %s of %d li to account %d: %w (entry %d)", e.Kind, e.Amount,
					e.AccountID, ErrKeyReused, p.id)
			}
			out[i].Posted = Posted{ID: p.id, BalanceAfter: rules.Money(p.balance), FrozenAfter: rules.Money(p.frozen)}
			continue
		}
		b, f, err := apply(e, balance, frozen)
		if errors.Is(err, rules.ErrRefused) {
			out[i].Refused = err
			continue
		}
		if err != nil {
			return nil, err
		}
		balance, frozen = b, f
		fresh[e.IdemKey] = i
		out[i].Posted = Posted{Created: true, BalanceAfter: rules.Money(balance), FrozenAfter: rules.Money(frozen)}
		ins.idx = append(ins.idx, i)
		ins.kinds, ins.keys = append(ins.kinds, string(e.Kind)), append(ins.keys, e.IdemKey)
		ins.notes, ins.at = append(ins.notes, relaytype.BoundText(e.Note, 200)), append(ins.at, e.At)
		ins.amounts, ins.balances, ins.frozens = append(ins.amounts, int64(e.Amount)), append(ins.balances, balance),
			append(ins.frozens, frozen)
	}
	if len(ins.idx) == 0 {
		return out, nil
	}
	// The inserts and the account's new state go in one round trip.
	last := ins.at[len(ins.at)-1]
	ids := map[string]int64{}
	b = &pgx.Batch{}
	b.Queue(stmts["LedgerInsertMany"], account, ins.kinds, ins.keys, ins.amounts, ins.balances, ins.frozens, ins.notes,
		ins.at).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id int64
			var k string
			if err := rows.Scan(&id, &k); err != nil {
				return fmt.Errorf("tenancy: post many: insert: %w", err)
			}
			ids[k] = id
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("tenancy: post many: insert: %w", err)
		}
		return nil
	})
	b.Queue(stmts["AccountSet"], account, balance, frozen, last).Exec(func(pgconn.CommandTag) error { return nil })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("tenancy: post many: %w", err)
	}
	for _, i := range ins.idx {
		out[i].ID = ids[es[i].IdemKey]
	}
	for i := range out { // a repeat of a key first posted in this call
		if j, ok := fresh[es[i].IdemKey]; ok && j != i && out[i].Refused == nil {
			out[i].ID = out[j].ID
		}
	}
	return out, nil
}

// AccountOf returns the account id of enterprise ent; relaytype.ErrNotFound
// when it has none.
func AccountOf(ctx context.Context, q Querier, ent int64) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, stmts["AccountOf"], ent).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("tenancy: account of enterprise %d: %w", ent, relaytype.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("tenancy: account of enterprise %d: %w", ent, err)
	}
	return id, nil
}

// Balance is an enterprise's account as it stands.
type Balance struct {
	Enterprise string
	Balance    rules.Money
	Frozen     rules.Money
}

// Balances returns every enterprise's account, by enterprise name.
func Balances(ctx context.Context, q Querier) ([]Balance, error) {
	rows, err := q.Query(ctx, stmts["Balances"])
	if err != nil {
		return nil, fmt.Errorf("tenancy: balances: %w", err)
	}
	defer rows.Close()
	var out []Balance
	for rows.Next() {
		var b Balance
		var bal, frozen int64
		if err := rows.Scan(&b.Enterprise, &bal, &frozen); err != nil {
			return nil, fmt.Errorf("tenancy: balances: %w", err)
		}
		b.Balance, b.Frozen = rules.Money(bal), rules.Money(frozen)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tenancy: balances: %w", err)
	}
	return out, nil
}
