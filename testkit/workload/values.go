package workload

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// textRunes are the characters of generated text: quotes, backslashes, separators, braces and
// multi-byte characters included, so escaping is exercised everywhere.
var textRunes = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,'\"\\{}:é日\n")

// valueGen draws SQL literals from a seeded source.
type valueGen struct {
	rng *rand.Rand
}

// quote returns s as a SQL string literal (standard_conforming_strings on).
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (g valueGen) text(minLen, maxLen int) string {
	n := minLen + g.rng.IntN(maxLen-minLen+1)
	var b strings.Builder
	for range n {
		b.WriteRune(textRunes[g.rng.IntN(len(textRunes))])
	}
	return b.String()
}

func (g valueGen) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.rng.IntN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// instant is a time between 1971 and 2099 with microseconds: inside every sink's range (the
// oldest, ClickHouse 18.16's DateTime, starts in 1970).
func (g valueGen) instant() time.Time {
	lo := time.Date(1971, 1, 2, 0, 0, 0, 0, time.UTC).UnixMicro()
	hi := time.Date(2099, 12, 31, 0, 0, 0, 0, time.UTC).UnixMicro()
	return time.UnixMicro(lo + g.rng.Int64N(hi-lo)).UTC()
}

// toastText is text of 9 to 12 KB, stored out of line (the column is STORAGE EXTERNAL).
func (g valueGen) toastText() string {
	return g.text(9000, 12000)
}

// literal returns a random SQL literal of c's kind (NULL sometimes for non-key columns).
func (g valueGen) literal(c Column) string {
	if !c.Key && !c.Toast && g.rng.IntN(10) == 0 {
		return "NULL"
	}
	if c.Toast {
		return g.toastLiteral(c)
	}
	if v := g.textKindLiteral(c); v != "" {
		return v
	}
	switch c.Kind {
	case Int2:
		return strconv.Itoa(g.rng.IntN(65536) - 32768)
	case Int4:
		return strconv.FormatInt(int64(g.rng.Uint32())-(1<<31), 10)
	case Int8:
		// beyond 2^53 often, so a sink that goes through float64 shows as stale
		return strconv.FormatInt(g.rng.Int64()-g.rng.Int64()/2, 10)
	case Float4:
		return strconv.FormatFloat(float64(g.rng.IntN(2_000_000)-1_000_000)/4, 'f', -1, 64) + "::real"
	case Float8:
		return strconv.FormatFloat(float64(g.rng.Int64N(1<<50)-(1<<49))/1024, 'f', -1, 64) + "::float8"
	case Numeric:
		return fmt.Sprintf("%d.%02d", g.rng.IntN(99_999_999)-49_999_999, g.rng.IntN(100))
	case NumericText:
		switch g.rng.IntN(8) {
		case 0:
			return "'NaN'::numeric"
		case 1:
			return "0"
		}
		return fmt.Sprintf("%d%018d.%d", g.rng.IntN(1_000_000)-500_000, g.rng.Uint64()%1e18, g.rng.IntN(100_000))
	case Text:
		return quote(g.text(0, 30))
	case Bool:
		return strconv.FormatBool(g.rng.IntN(2) == 0)
	case Date:
		return quote(g.instant().Format(time.DateOnly)) + "::date"
	case Time:
		return quote(g.instant().Format("15:04:05.999999")) + "::time"
	case Timestamp:
		return quote(g.instant().Format("2006-01-02 15:04:05.999999")) + "::timestamp"
	case Timestamptz:
		return quote(g.instant().In(time.FixedZone("", (g.rng.IntN(25)-12)*3600)).Format("2006-01-02 15:04:05.999999-07:00")) + "::timestamptz"
	case UUID:
		return quote(g.uuid()) + "::uuid"
	case Bytea:
		b := make([]byte, g.rng.IntN(48))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		return quote(`\x`+hex.EncodeToString(b)) + "::bytea"
	case JSON:
		return quote(fmt.Sprintf(`{"n": %d, "s": %s, "list": [%d, null, true], "nested": {"k": %s}}`,
			g.rng.IntN(1000), jsonString(g.text(0, 8)), g.rng.IntN(10), jsonString(g.text(0, 4))))
	case Int4Array:
		n := g.rng.IntN(5)
		elems := make([]string, n)
		for i := range elems {
			elems[i] = strconv.Itoa(int(g.rng.Int32N(1 << 30)))
			if g.rng.IntN(6) == 0 {
				elems[i] = "NULL"
			}
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::" + c.SQL
	case TextArray:
		n := g.rng.IntN(4)
		elems := make([]string, n)
		for i := range elems {
			elems[i] = quote(g.text(0, 6))
			if g.rng.IntN(6) == 0 {
				elems[i] = "NULL"
			}
		}
		return "ARRAY[" + strings.Join(elems, ",") + "]::" + c.SQL
	}
	panic("workload: no literal for kind " + c.Kind.String())
}

// jsonString quotes s as a JSON string (control characters escaped).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
