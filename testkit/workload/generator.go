package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Stats counts what a Generator did.
type Stats struct {
	Inserted, Updated, Deleted, KeyChanges, MultiTableTx, LargeTxRows, Ops int
	// PartitionMoves are the key changes that moved a row to another partition; PartitionsAdded
	// the partitions created or attached while running.
	PartitionMoves, PartitionsAdded int
}

// String prints the counts for logs and reports.
func (s Stats) String() string {
	return fmt.Sprintf("%d ops: %d inserted, %d updated, %d deleted, %d key changes (%d moving partitions), %d multi-table transactions, %d rows in the large transaction, %d partitions added",
		s.Ops, s.Inserted, s.Updated, s.Deleted, s.KeyChanges, s.PartitionMoves, s.MultiTableTx, s.LargeTxRows, s.PartitionsAdded)
}

// Generator writes a seeded workload into a source database. Its methods must not be called
// concurrently with each other, except Universe and Stats, which may be called at any time.
type Generator struct {
	seed   uint64
	rng    *rand.Rand
	vals   valueGen
	dsn    string
	tables []*Table
	conn   *pgx.Conn
	// reader is Check's connection, kept between checks (a test checks every table every few
	// seconds); readMu serializes checks on it. Closed by Close, dropped after an error.
	readMu sync.Mutex
	reader *pgx.Conn

	mu       sync.Mutex     // guards live, universe, stats, parts
	parts    map[string]int // partitions each partitioned table has
	live     map[string]*keySet
	dead     map[string]*keySet
	universe map[string]*keySet
	stats    Stats
}

// New returns a generator for the database at dsn, driven by seed. Connect happens on first use.
func New(dsn string, seed uint64) *Generator {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &Generator{seed: seed, rng: rng, vals: valueGen{rng: rng}, dsn: dsn, tables: Tables(),
		live: map[string]*keySet{}, dead: map[string]*keySet{}, universe: map[string]*keySet{}, parts: map[string]int{}}
	for _, t := range g.tables {
		g.live[t.Name], g.dead[t.Name], g.universe[t.Name] = newKeySet(), newKeySet(), newKeySet()
		if t.Partitioning != nil {
			g.parts[t.Name] = t.Partitioning.Initial
		}
	}
	return g
}

// Seed is the generator's seed: every run with it does the same operations.
func (g *Generator) Seed() uint64 { return g.seed }

// Tables are the generator's tables.
func (g *Generator) Tables() []*Table { return g.tables }

// Table returns the table named name (without schema), or nil.
func (g *Generator) Table(name string) *Table {
	for _, t := range g.tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Universe returns every key table ever held (live or deleted since): the keys a checker of a
// sink that cannot be listed must look up.
func (g *Generator) Universe(table string) []Key {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.universe[table]; s != nil {
		return s.all()
	}
	return nil
}

// Live returns the keys table holds now, as far as the generator wrote them.
func (g *Generator) Live(table string) []Key {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.live[table]; s != nil {
		return s.all()
	}
	return nil
}

// Stats returns what the generator did so far.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// Close closes the generator's connections.
func (g *Generator) Close(ctx context.Context) error {
	g.readMu.Lock()
	if g.reader != nil {
		_ = g.reader.Close(ctx)
		g.reader = nil
	}
	g.readMu.Unlock()
	if g.conn == nil {
		return nil
	}
	err := g.conn.Close(ctx)
	g.conn = nil
	return err
}

// readSource reads t from the source over Check's connection, connecting when it has none.
func (g *Generator) readSource(ctx context.Context, t *Table) ([]Row, error) {
	g.readMu.Lock()
	defer g.readMu.Unlock()
	if g.reader == nil {
		conn, err := pgx.Connect(ctx, g.dsn)
		if err != nil {
			return nil, fmt.Errorf("connecting to the source: %w", err)
		}
		g.reader = conn
	}
	rows, err := readSource(ctx, g.reader, t)
	if err != nil {
		_ = g.reader.Close(context.WithoutCancel(ctx)) // perhaps broken: the next check connects
		g.reader = nil
	}
	return rows, err
}

func (g *Generator) errorf(format string, args ...any) error {
	return fmt.Errorf("workload seed %d: "+format, append([]any{g.seed}, args...)...)
}

func (g *Generator) connect(ctx context.Context) error {
	if g.conn != nil {
		return nil
	}
	conn, err := pgx.Connect(ctx, g.dsn)
	if err != nil {
		return g.errorf("connecting to the source: %w", err)
	}
	g.conn = conn
	return nil
}

// Create creates the extensions and types the tables need, and the tables.
func (g *Generator) Create(ctx context.Context) error {
	stmts := setupDDL()
	for _, t := range g.tables {
		stmts = append(stmts, t.DDL()...)
	}
	return g.execTx(ctx, stmts)
}

// Fill inserts rows new rows into table, in statements of at most 500 rows, one transaction
// per statement.
func (g *Generator) Fill(ctx context.Context, table string, rows int) error {
	t := g.Table(table)
	if t == nil {
		return g.errorf("%w: %s", ErrNoTable, table)
	}
	for rows > 0 {
		n := min(rows, 500)
		if err := g.execTx(ctx, []string{g.insert(t, n)}); err != nil {
			return err
		}
		rows -= n
	}
	return nil
}

// execTx runs stmts in one transaction. The statements run to completion even when ctx ends
// (they are short), so the generator's record of the keys never disagrees with the source.
func (g *Generator) execTx(ctx context.Context, stmts []string) error {
	if err := g.connect(ctx); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	err := pgx.BeginFunc(ctx, g.conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if s == "" {
				continue
			}
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%.300s: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		return g.errorf("writing the source: %w", err)
	}
	return nil
}

// Partitions returns the partitions table has now (0 for a table that is not partitioned).
func (g *Generator) Partitions(table string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.parts[table]
}

// addPartition returns the statements adding the next partition of the first partitioned
// table that can take one (nil when none can).
func (g *Generator) addPartition() []string {
	for _, t := range g.tables {
		if p := t.Partitioning; p != nil && g.parts[t.Name] < p.Max {
			g.mu.Lock()
			defer g.mu.Unlock()
			stmts := t.partitionDDL(g.parts[t.Name])
			g.parts[t.Name]++
			g.stats.PartitionsAdded++
			return stmts
		}
	}
	return nil
}

// RunOptions shape a Run.
type RunOptions struct {
	// Ops is the number of operations; zero or less runs until ctx ends.
	Ops int
	// LargeTxRows, when positive, makes one operation (the middle one, or the 50th when Ops is
	// unbounded) a single transaction inserting that many rows into wl_items and updating and
	// deleting some existing ones.
	LargeTxRows int
	// MaxRowsPerOp bounds the rows an insert, update or delete touches (default 20).
	MaxRowsPerOp int
}

// Run performs random operations: inserts, updates, deletes, key changes (moving rows between
// partitions among them), transactions over several tables, and optionally one large
// transaction. Before operations 10, 30, 50, ... of a run, a transaction of its own adds a
// partition to a partitioned table while one can take it. It returns nil when the operations are done or ctx ends; an error
// names the seed.
func (g *Generator) Run(ctx context.Context, o RunOptions) error {
	if o.MaxRowsPerOp <= 0 {
		o.MaxRowsPerOp = 20
	}
	largeAt := 50
	if o.Ops > 0 {
		largeAt = o.Ops / 2
	}
	for i := 0; o.Ops <= 0 || i < o.Ops; i++ {
		if ctx.Err() != nil {
			return nil
		}
		if i%20 == 10 {
			if err := g.execTx(ctx, g.addPartition()); err != nil {
				return fmt.Errorf("adding a partition before operation %d: %w", i, err)
			}
		}
		var stmts []string
		if i == largeAt && o.LargeTxRows > 0 {
			stmts = g.largeTx(o.LargeTxRows)
		} else {
			stmts = g.step(o.MaxRowsPerOp)
		}
		if err := g.execTx(ctx, stmts); err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
		g.mu.Lock()
		g.stats.Ops++
		g.mu.Unlock()
	}
	return nil
}

// step draws one operation (one transaction) and returns its statements.
func (g *Generator) step(maxRows int) []string {
	r := g.rng.IntN(100)
	if r >= 85 { // a transaction over two or three tables
		g.mu.Lock()
		g.stats.MultiTableTx++
		g.mu.Unlock()
		var stmts []string
		for _, i := range g.rng.Perm(len(g.tables))[:2+g.rng.IntN(len(g.tables)-1)] {
			stmts = append(stmts, g.single(g.tables[i], g.rng.IntN(85), maxRows)...)
		}
		return stmts
	}
	return g.single(g.tables[g.rng.IntN(len(g.tables))], r, maxRows)
}

// single returns the statements of one operation on t, chosen by r in [0, 85).
func (g *Generator) single(t *Table, r, maxRows int) []string {
	n := 1 + g.rng.IntN(maxRows)
	live := g.live[t.Name].len()
	switch {
	case r < 30 || live < 10:
		return []string{g.insert(t, n)}
	case r < 60:
		return g.update(t, n)
	case r < 75:
		return g.delete(t, min(n, live/4))
	default:
		return g.changeKey(t)
	}
}

// newKey draws a key table never held, or now and then one it held and deleted (a re-insert).
func (g *Generator) newKey(t *Table) Key {
	if dead := g.dead[t.Name]; dead.len() > 0 && g.rng.IntN(20) == 0 {
		return dead.pick(g.rng)
	}
	for {
		var k Key
		switch t.Name {
		case "wl_items", "wl_types":
			k = Key{strconv.FormatInt(g.rng.Int64N(1<<62)-(1<<61), 10)}
		case "wl_parts":
			k = Key{strconv.FormatInt(g.rng.Int64N(1<<40), 10), g.partKey(t)}
		case "wl_lines":
			sep := ""
			if g.rng.IntN(4) == 0 {
				sep = ":" // Couchbase escapes it in document keys
			}
			k = Key{strconv.Itoa(g.rng.IntN(1_000_000)), "L" + sep + strconv.Itoa(g.rng.IntN(1000))}
		default:
			k = Key{g.vals.uuid()}
		}
		if !g.universe[t.Name].has(k) {
			return k
		}
	}
}

// partKey returns a value of t's partition key column in one of its partitions.
func (g *Generator) partKey(t *Table) string {
	return strconv.Itoa(g.rng.IntN(t.Partitioning.Width * g.parts[t.Name]))
}

// partition returns the partition of t that key k is in.
func partition(t *Table, k Key) int {
	for i, c := range t.Keys() {
		if c.Name == t.Partitioning.Column {
			n, _ := strconv.Atoi(k[i])
			return n / t.Partitioning.Width
		}
	}
	return -1
}

// track records that k was inserted into (live) or deleted from (!live) t.
func (g *Generator) track(t *Table, k Key, live bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if live {
		g.live[t.Name].add(k)
		g.dead[t.Name].remove(k)
		g.universe[t.Name].add(k)
		return
	}
	g.live[t.Name].remove(k)
	g.dead[t.Name].add(k)
}

// keyLiteral returns the SQL literal of one key part.
func keyLiteral(c Column, part string) string {
	switch c.Kind {
	case Int2, Int4, Int8:
		return part
	case UUID:
		return quote(part) + "::uuid"
	}
	return quote(part)
}

// where returns the condition selecting k in t.
func where(t *Table, k Key) string {
	var conds []string
	for i, c := range t.Keys() {
		conds = append(conds, c.Name+" = "+keyLiteral(c, k[i]))
	}
	return strings.Join(conds, " AND ")
}

func columnNames(cols []Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// insert returns one INSERT of up to n new rows ("" when it has none).
func (g *Generator) insert(t *Table, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", t.Qualified(), columnNames(t.Columns))
	written := 0
	for range n {
		k := g.newKey(t)
		if g.live[t.Name].has(k) { // a re-inserted key drawn twice in this statement
			continue
		}
		if written > 0 {
			b.WriteString(", ")
		}
		written++
		b.WriteString("(")
		ki := 0
		for j, c := range t.Columns {
			if j > 0 {
				b.WriteString(", ")
			}
			if c.Key {
				b.WriteString(keyLiteral(c, k[ki]))
				ki++
				continue
			}
			b.WriteString(g.vals.literal(c))
		}
		b.WriteString(")")
		g.track(t, k, true)
		g.mu.Lock()
		g.stats.Inserted++
		g.mu.Unlock()
	}
	if written == 0 {
		return ""
	}
	return b.String()
}

// update returns UPDATEs of n live rows, each setting a random subset of the non-key columns;
// a TOASTed column is rewritten only now and then, so most updates leave it unchanged.
func (g *Generator) update(t *Table, n int) []string {
	var out []string
	vals := t.Values()
	for range n {
		k := g.live[t.Name].pick(g.rng)
		var sets []string
		for _, c := range vals {
			if c.Toast && g.rng.IntN(10) != 0 || !c.Toast && g.rng.IntN(3) == 0 {
				continue
			}
			sets = append(sets, c.Name+" = "+g.vals.literal(c))
		}
		if len(sets) == 0 {
			c := vals[0]
			sets = append(sets, c.Name+" = "+g.vals.literal(c))
		}
		out = append(out, fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.Qualified(), strings.Join(sets, ", "), where(t, k)))
		g.mu.Lock()
		g.stats.Updated++
		g.mu.Unlock()
	}
	return out
}

// delete returns one DELETE of n distinct live rows.
func (g *Generator) delete(t *Table, n int) []string {
	var conds []string
	for range n {
		k := g.live[t.Name].pick(g.rng)
		conds = append(conds, "("+where(t, k)+")")
		g.track(t, k, false)
		g.mu.Lock()
		g.stats.Deleted++
		g.mu.Unlock()
	}
	if len(conds) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("DELETE FROM %s WHERE %s", t.Qualified(), strings.Join(conds, " OR "))}
}

// changeKey returns an UPDATE that moves a live row to a new key (sometimes changing a value
// too), leaving any TOASTed column unchanged.
func (g *Generator) changeKey(t *Table) []string {
	old := g.live[t.Name].pick(g.rng)
	k := g.newKey(t)
	if t.Partitioning != nil && g.rng.IntN(3) != 0 {
		// The same row in another partition, by an update of the partition key alone.
		k = append(Key(nil), old...)
		for i, c := range t.Keys() {
			if c.Name == t.Partitioning.Column {
				k[i] = g.partKey(t)
			}
		}
	}
	if g.live[t.Name].has(k) {
		return nil
	}
	var sets []string
	for i, c := range t.Keys() {
		sets = append(sets, c.Name+" = "+keyLiteral(c, k[i]))
	}
	if vals := t.Values(); g.rng.IntN(2) == 0 && !vals[0].Toast {
		sets = append(sets, vals[0].Name+" = "+g.vals.literal(vals[0]))
	}
	stmt := fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.Qualified(), strings.Join(sets, ", "), where(t, old))
	g.track(t, old, false)
	g.track(t, k, true)
	g.mu.Lock()
	g.stats.KeyChanges++
	if t.Partitioning != nil && partition(t, old) != partition(t, k) {
		g.stats.PartitionMoves++
	}
	g.mu.Unlock()
	return []string{stmt}
}

// largeTx returns the statements of one transaction inserting rows rows into wl_items (in
// statements of 1,000) and updating and deleting some of its existing rows.
func (g *Generator) largeTx(rows int) []string {
	t := g.Table("wl_items")
	var out []string
	out = append(out, g.update(t, min(200, g.live[t.Name].len()))...)
	for left := rows; left > 0; left -= 1000 {
		out = append(out, g.insert(t, min(left, 1000)))
	}
	out = append(out, g.delete(t, min(200, g.live[t.Name].len()/4))...)
	g.mu.Lock()
	g.stats.LargeTxRows += rows
	g.mu.Unlock()
	return out
}

// Delete deletes the given keys of table (keys it does not hold are ignored) in one
// transaction, and records them as deleted.
func (g *Generator) Delete(ctx context.Context, table string, keys []Key) error {
	t := g.Table(table)
	if t == nil {
		return g.errorf("%w: %s", ErrNoTable, table)
	}
	var stmts []string
	for len(keys) > 0 {
		n := min(len(keys), 500)
		var conds []string
		for _, k := range keys[:n] {
			conds = append(conds, "("+where(t, k)+")")
		}
		stmts = append(stmts, fmt.Sprintf("DELETE FROM %s WHERE %s", t.Qualified(), strings.Join(conds, " OR ")))
		for _, k := range keys[:n] {
			if g.live[t.Name].has(k) {
				g.track(t, k, false)
				g.mu.Lock()
				g.stats.Deleted++
				g.mu.Unlock()
			}
		}
		keys = keys[n:]
	}
	return g.execTx(ctx, stmts)
}
