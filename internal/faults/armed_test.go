//go:build faults

package faults

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		spec    string
		want    []Fault
		wantErr []string // substrings of the error
	}{
		{"empty", "", nil, nil},
		{"blanks", " , ", nil, nil},
		{"default pass", "commit.before-write:kill", []Fault{{CommitBeforeWrite, Kill, 1, "", ""}}, nil},
		{"pass and table", "commit.after-write:kill@3:public.items",
			[]Fault{{CommitAfterWrite, Kill, 3, "public.items", ""}}, nil},
		{"hang", "snapshot.after-write:hang@3:public.items",
			[]Fault{{SnapshotAfterWrite, Hang, 3, "public.items", ""}}, nil},
		{"several with spaces", "commit.after-ack:kill@2, commit.ack-before-write:kill@1:s.t",
			[]Fault{{CommitAfterAck, Kill, 2, "", ""}, {CommitAckBeforeWrite, Kill, 1, "s.t", ""}}, nil},
		{"unknown point lists the points", "commit.sometime:kill",
			nil, []string{`fault 1 "commit.sometime:kill": unknown point "commit.sometime"`, "points: commit.before-write, commit.after-write"}},
		{"unknown action", "commit.before-write:panic", nil, []string{`unknown action "panic": want kill or hang`}},
		{"pass zero", "commit.before-write:kill@0", nil, []string{`pass "0": want a whole number from 1`}},
		{"pass not a number", "commit.before-write:kill@x", nil, []string{`pass "x"`}},
		{"table without schema", "commit.before-write:kill@1:items", nil, []string{`table "items": want SCHEMA.TABLE`}},
		{"no action", "commit.before-write", nil, []string{"want POINT:ACTION[@N][:SCHEMA.TABLE]"}},
		{"activity start", "activity.start:kill@2:LoadTable",
			[]Fault{{ActivityStart, Kill, 2, "", "LoadTable"}}, nil},
		{"activity start without a type", "activity.start:kill", nil, []string{"want activity.start:ACTION[@N]:ACTIVITYTYPE"}},
		{"activity start with a table", "activity.start:kill:public.items", nil, []string{"an activity type such as LoadTable"}},
		{"every problem at once", "commit.x:kill,commit.before-write:kill,commit.after-write:kill@-1",
			nil, []string{`fault 1 "commit.x:kill"`, `fault 3 "commit.after-write:kill@-1"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(c.spec)
			if len(c.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want an error", c.spec, got)
				}
				for _, w := range c.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.spec, err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("Parse(%q) = %v, want %v", c.spec, got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("fault %d = %+v, want %+v", i, got[i], c.want[i])
				}
				if again, err := Parse(got[i].String()); err != nil || again[0] != got[i] {
					t.Errorf("String %q does not parse back: %v %v", got[i].String(), again, err)
				}
			}
		})
	}
}

// TestFires checks which pass fires, per table, with the crash replaced by a recorder.
func TestFires(t *testing.T) {
	t.Parallel()
	type pass struct {
		point Point
		table string
	}
	cases := []struct {
		name   string
		spec   string
		passes []pass
		want   []int // indexes of the passes that crash
	}{
		{"third pass", "commit.before-write:kill@3",
			[]pass{{CommitBeforeWrite, "a.x"}, {CommitBeforeWrite, "a.y"}, {CommitAfterWrite, "a.x"}, {CommitBeforeWrite, "a.x"}, {CommitBeforeWrite, "a.x"}},
			[]int{3}},
		{"only the named table counts", "commit.after-write:kill@2:a.y",
			[]pass{{CommitAfterWrite, "a.x"}, {CommitAfterWrite, "a.y"}, {CommitAfterWrite, "a.x"}, {CommitAfterWrite, "a.y"}, {CommitAfterWrite, "a.y"}},
			[]int{3}},
		{"two faults", "commit.before-write:kill@1,commit.after-ack:kill@2",
			[]pass{{CommitBeforeWrite, "a.x"}, {CommitAfterAck, "a.x"}, {CommitBeforeWrite, "a.x"}, {CommitAfterAck, "a.x"}},
			[]int{0, 3}},
		{"never reached", "commit.after-ack:kill@5", []pass{{CommitAfterAck, "a.x"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(c.spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			crashes := 0
			p.crash = func() { crashes++ }
			var got []int
			for i, ps := range c.passes {
				before := crashes
				p.Hit(ps.point, refOf(ps.table))
				if crashes > before {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("crashed at passes %v, want %v", got, c.want)
			}
		})
	}
}

// TestHitActivity checks which activity start fires, per activity type, and that activity
// faults do not count commit passes nor commit faults activity starts.
func TestHitActivity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		spec   string
		starts []string // activity types started, in order; "commit" is a pass of CommitBeforeWrite
		want   []int    // indexes of the starts that crash
	}{
		{"first start", "activity.start:kill:LoadTable", []string{"TableSchema", "LoadTable", "LoadTable"}, []int{1}},
		{"second start of its type", "activity.start:kill@2:CommitBatch",
			[]string{"CommitBatch", "LoadTable", "commit", "CommitBatch", "CommitBatch"}, []int{3}},
		{"commit faults ignore activity starts", "commit.before-write:kill@2",
			[]string{"CommitBatch", "commit", "CommitBatch", "commit"}, []int{3}},
		{"never started", "activity.start:kill:MaintainTable", []string{"CommitBatch", "commit"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(c.spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			crashes := 0
			p.crash = func() { crashes++ }
			var got []int
			for i, s := range c.starts {
				before := crashes
				if s == "commit" {
					p.Hit(CommitBeforeWrite, refOf("a.x"))
				} else {
					p.HitActivity(s)
				}
				if crashes > before {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("crashed at starts %v, want %v", got, c.want)
			}
		})
	}
	var nilPoints *Points
	nilPoints.HitActivity("LoadTable") // a worker without faults: no-op
}

// TestNilIsNoOp checks that an unarmed worker's nil Points never fires.
func TestNilIsNoOp(t *testing.T) {
	t.Parallel()
	p, err := New("", nil)
	if err != nil || p != nil {
		t.Fatalf("New(\"\") = %v, %v; want nil, nil", p, err)
	}
	if p.Fires(CommitBeforeWrite, refOf("a.x")) {
		t.Fatal("nil Points fired")
	}
	p.Hit(CommitAfterWrite, refOf("a.x"))
	p.Crash(CommitAfterAck, refOf("a.x"))
	if p.String() != "" {
		t.Fatalf("nil Points = %q", p.String())
	}
}

// refOf is a batch ref of table "schema.name".
func refOf(table string) staging.BatchRef {
	schema, name, _ := strings.Cut(table, ".")
	return staging.BatchRef{Table: batch.TableName{Schema: schema, Name: name}}
}

// TestCrashNamesTheBatch checks the crash's log line names the point and the batch, so a test
// can check the sink and the staging store at the moment of the crash.
func TestCrashNamesTheBatch(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p, err := New("commit.after-write:kill", slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	p.crash = func() {}
	ref := refOf("public.items")
	ref.Hi.Position = batch.Position{LSN: 0x16B3748, Seq: 12}
	ref.URI = "file:///staging/x.arrow"
	p.Hit(CommitAfterWrite, ref)
	for _, want := range []string{"fault injected", "point=commit.after-write", "table=public.items", "hi=0/16B3748:12", "uri=file:///staging/x.arrow"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("crash log %q does not hold %q", buf.String(), want)
		}
	}
}
