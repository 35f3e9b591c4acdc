package staging

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gocloud.dev/blob"

	"github.com/sluicecdc/sluice/batch"
)

// Compare orders refs for committing: by source (so refs of one source stay together; refs of
// different sources have no position order and CommitBatch rejects them), then lo, then hi, then
// URI. It is a pure function, safe to use in workflow code.
func Compare(a, b BatchRef) int {
	if a.Lo.Source != b.Lo.Source { // equal sources print equal: only unequal ones are printed
		if c := cmp.Compare(a.Lo.Source.String(), b.Lo.Source.String()); c != 0 {
			return c
		}
	}
	if c := comparePos(a.Lo.Position, b.Lo.Position); c != 0 {
		return c
	}
	if c := comparePos(a.Hi.Position, b.Hi.Position); c != 0 {
		return c
	}
	return cmp.Compare(a.URI, b.URI)
}

func comparePos(a, b batch.Position) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// List returns every staged batch of one table of a pipeline, ordered by Compare, with rows and
// phase read from each object's metadata.
func (s *Store) List(ctx context.Context, pipeline string, table batch.TableName) ([]BatchRef, error) {
	refs, err := s.list(ctx, tablePrefix(pipeline, table), true, true)
	if err != nil {
		return nil, fmt.Errorf("listing staged batches of %s in pipeline %s: %w", table, pipeline, err)
	}
	return refs, nil
}

// ListAfter returns the staged batches of a table that a sink holding position after still needs:
// those whose hi is after it, ordered by Compare. With hasAfter false (nothing committed) it
// returns every staged batch. Staged batches of a different source than after are an error that
// wraps batch.ErrDifferentSource: their order relative to the committed position is undefined.
func (s *Store) ListAfter(ctx context.Context, pipeline string, table batch.TableName, after batch.SourcePosition, hasAfter bool) ([]BatchRef, error) {
	refs, err := s.List(ctx, pipeline, table)
	if err != nil {
		return nil, err
	}
	return FilterAfter(refs, after, hasAfter)
}

// FilterAfter keeps the refs whose hi is after the committed position after (all of them when
// hasAfter is false). Refs of another source than after, or refs of several sources when
// nothing is committed, are an error wrapping batch.ErrDifferentSource.
func FilterAfter(refs []BatchRef, after batch.SourcePosition, hasAfter bool) ([]BatchRef, error) {
	out := make([]BatchRef, 0, len(refs))
	for _, r := range refs {
		if !hasAfter {
			if len(refs) > 0 && r.Hi.Source != refs[0].Hi.Source {
				return nil, fmt.Errorf("staged batches of %s belong to sources %s and %s: %w",
					r.Table, refs[0].Hi.Source, r.Hi.Source, batch.ErrDifferentSource)
			}
			out = append(out, r)
			continue
		}
		c, err := r.Hi.Compare(after)
		if err != nil {
			return nil, fmt.Errorf("staged batch %s against committed position %s: %w", r, after, err)
		}
		if c > 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// ListPipeline returns every staged batch of a pipeline, all tables, ordered by table then
// Compare. It reads names only (Rows is 0 and Phase is stream in the result), which is all the
// reader needs to compute the minimum safe position.
func (s *Store) ListPipeline(ctx context.Context, pipeline string) ([]BatchRef, error) {
	refs, err := s.list(ctx, pipelinePrefix(pipeline), false, true)
	if err != nil {
		return nil, fmt.Errorf("listing staged batches of pipeline %s: %w", pipeline, err)
	}
	return refs, nil
}

// list lists the batch files under prefix, ordered by table then Compare. withAttrs reads each
// one's metadata; withSizes sets Bytes, which costs a local store a stat per file (a bucket's
// listing has them): without it Bytes is 0.
func (s *Store) list(ctx context.Context, prefix string, withAttrs, withSizes bool) ([]BatchRef, error) {
	var refs []BatchRef
	var err error
	if s.dir != "" {
		refs, err = s.listDir(ctx, prefix, withAttrs, withSizes)
	} else {
		refs, err = s.listOnce(ctx, prefix, withAttrs)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(refs, func(a, b BatchRef) int {
		if a.Table != b.Table {
			if c := cmp.Compare(a.Table.String(), b.Table.String()); c != 0 {
				return c
			}
		}
		return Compare(a, b)
	})
	return refs, nil
}

// listDir lists a local store by reading its directories: pipeline/schema.table/source/ hold
// the batch files, and each directory's part of their names is parsed once. A file acknowledged
// while the listing runs vanishes between the directory read and its stat; it is left out, as a
// listing a moment later would (the bucket's own listing fails on it instead, and the reader's
// listings run while tables acknowledge batches). Names are the object keys, as the bucket
// stores them, unless one holds the bucket's escape marker "__0x": such a tree is listed through
// the bucket. (A listing of 20,000 files through filepath.WalkDir spent most of its time joining,
// relativizing and splitting the same paths again.)
func (s *Store) listDir(ctx context.Context, prefix string, withAttrs, withSizes bool) ([]BatchRef, error) {
	root := filepath.Join(s.dir, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	var refs []BatchRef
	escaped := false
	// read lists dir, whose object keys start with key (ending in '/', depth '/'s deep): the
	// directories above the batch files, or (depth 3) a source's directory of batch files, read as
	// bare names (a batch file is never a directory; no stat unless sizes are asked for).
	var read func(dir, key string, depth int) error
	read = func(dir, key string, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if depth < 3 {
			entries, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished (or nothing staged under prefix yet)
			}
			if err != nil {
				return err
			}
			for _, e := range entries {
				if e.IsDir() {
					if err := read(filepath.Join(dir, e.Name()), key+e.Name()+"/", depth+1); err != nil || escaped {
						return err
					}
				} else if strings.HasSuffix(e.Name(), fileSuffix) {
					return fmt.Errorf("staged object %q: want pipeline/schema.table/source/lo-hi%s", key+e.Name(), fileSuffix)
				}
			}
			return nil
		}
		names, err := readNames(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		if strings.Contains(key, "__0x") {
			escaped = true
			return nil
		}
		tmpl, err := parseDirName(key)
		if err != nil {
			return fmt.Errorf("staged directory %q: %w", key, err)
		}
		refs = slices.Grow(refs, len(names))
		for _, name := range names {
			if !strings.HasSuffix(name, fileSuffix) {
				continue // a stranded temporary file of an interrupted write is not a batch
			}
			if strings.Contains(name, "__0x") {
				escaped = true
				return nil
			}
			ref, err := withFileName(tmpl, key+name, name)
			if err != nil {
				return err
			}
			var size int64
			if withSizes {
				info, err := os.Lstat(filepath.Join(dir, name))
				if errors.Is(err, fs.ErrNotExist) {
					continue // acknowledged meanwhile
				}
				if err != nil {
					return err
				}
				size = info.Size()
			}
			ref, err = s.listedRef(ctx, ref, key+name, size, withAttrs)
			if errors.Is(err, ErrNotFound) {
				continue // acknowledged between the stat and the metadata read
			}
			if err != nil {
				return err
			}
			refs = append(refs, ref)
		}
		return nil
	}
	err := read(root, prefix, strings.Count(prefix, "/"))
	if escaped {
		return s.listOnce(ctx, prefix, withAttrs)
	}
	if err != nil {
		return nil, fmt.Errorf("listing staging directory %s: %w", root, err)
	}
	return refs, nil
}

// readNames returns the names in dir, sorted: batch files then come in position order (their
// names are fixed-width hex), which the listing's sort by Compare then only confirms.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// listOnce lists through the bucket (S3, or a local tree whose names the bucket escaped).
func (s *Store) listOnce(ctx context.Context, prefix string, withAttrs bool) ([]BatchRef, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	var refs []BatchRef
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		// Only batch files count: a stranded temporary file of an interrupted write is not a batch.
		if obj.IsDir || !strings.HasSuffix(obj.Key, fileSuffix) {
			continue
		}
		ref, err := s.refFromListing(ctx, obj, withAttrs)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// Window is a bounded slice of the staged batches a table still needs, as ListWindow returns it.
type Window struct {
	// Refs are the first staged batches after the committed position, in Compare order, with
	// rows, phase and first commit time read from their metadata, and their size.
	Refs []BatchRef
	// Staged is how many staged batches the table still needs in all, Refs included: more are
	// staged beyond Refs when it exceeds len(Refs).
	Staged int
	// Hi is the highest hi of the staged batches the table needs (zero when none).
	Hi batch.SourcePosition
}

// ListWindow returns the first staged batches of a table that a sink holding position after
// still needs (as ListAfter, with the same source rule), at most limit of them and, when
// maxBytes > 0, no more than fit in maxBytes of JSON; at least one when any is staged. It reads
// names only for the whole table (not even a local file's size: a stat per file was most of a
// listing's cost) and metadata and size only for the refs it returns, so a table with tens of
// thousands of staged batches costs one listing and limit metadata reads per window.
func (s *Store) ListWindow(ctx context.Context, pipeline string, table batch.TableName, after batch.SourcePosition, hasAfter bool, limit, maxBytes int) (Window, error) {
	names, err := s.list(ctx, tablePrefix(pipeline, table), false, false)
	if err != nil {
		return Window{}, fmt.Errorf("listing staged batches of %s in pipeline %s: %w", table, pipeline, err)
	}
	need, err := FilterAfter(names, after, hasAfter)
	if err != nil {
		return Window{}, err
	}
	w := Window{Staged: len(need)}
	if len(need) > 0 {
		w.Hi = need[0].Hi
		for _, r := range need[1:] {
			if w.Hi.Position.Less(r.Hi.Position) {
				w.Hi = r.Hi
			}
		}
	}
	size := 0
	for _, r := range need {
		if limit > 0 && len(w.Refs) >= limit {
			break
		}
		key := strings.TrimPrefix(r.URI, s.base)
		attrs, err := s.bucket.Attributes(ctx, key)
		if err != nil {
			return Window{}, fmt.Errorf("reading attributes of staged batch %s: %w", r, s.classify(err))
		}
		if r, err = withMetadata(r, attrs.Metadata); err != nil {
			return Window{}, err
		}
		r.Bytes = attrs.Size
		if n, err := json.Marshal(r); err == nil {
			size += len(n) + 1
		}
		if maxBytes > 0 && size > maxBytes && len(w.Refs) > 0 {
			break
		}
		w.Refs = append(w.Refs, r)
	}
	return w, nil
}
