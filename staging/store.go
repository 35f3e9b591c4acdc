package staging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/sluicecdc/sluice/batch"
)

// Metadata keys stored with each object, so a listing can rebuild a complete BatchRef.
const (
	metaRows  = "sluice-rows"
	metaPhase = "sluice-phase"
	// metaFirstCommit is the batch's FirstCommit (RFC 3339), absent for snapshot batches.
	metaFirstCommit = "sluice-first-commit"
)

// Store is a staging location: a local directory or a prefix of an S3-compatible bucket. It is
// safe for concurrent use. Every method honours ctx cancellation.
type Store struct {
	bucket *blob.Bucket
	base   string // URI of the store's root, ending in '/': file:///dir/ or s3://bucket/prefix/
	dir    string // a local store's directory ("" for S3): listed by walking it (listDir)
}

// OpenDir opens a staging store in a local directory, creating it when missing. A local store
// serves only workers on the same host (use host-pinned task queues); use S3 across hosts.
// Staged files hold row data: the directories are made 0700 and the files 0600 (a directory
// that existed with other modes is changed), and temporary files of writes that died with their
// process are removed.
func OpenDir(_ context.Context, dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening staging directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, dirMode); err != nil {
		return nil, fmt.Errorf("opening staging directory %s: %w", abs, err)
	}
	if _, err := secureDir(abs, time.Now()); err != nil {
		return nil, err
	}
	// NoTempDir: files are written beside their final name and renamed, which works when the
	// directory is on another mount than os.TempDir.
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{NoTempDir: true, DirFileMode: dirMode})
	if err != nil {
		return nil, fmt.Errorf("opening staging directory %s: %w", abs, err)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs) + "/"}
	return &Store{bucket: b, base: u.String(), dir: abs}, nil
}

// S3Config locates a staging store in an S3-compatible bucket.
type S3Config struct {
	Bucket          string // bucket name (required)
	Prefix          string // optional key prefix, e.g. "sluice/staging"
	Endpoint        string // custom endpoint URL for S3-compatible services; empty for AWS
	Region          string // region; "us-east-1" when empty
	AccessKeyID     string // static credentials; both empty uses the SDK's default chain
	SecretAccessKey string
	PathStyle       bool // path-style addressing (bucket in the path), usual for custom endpoints
}

// OpenS3 opens a staging store in an S3-compatible bucket.
func OpenS3(ctx context.Context, cfg S3Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("opening S3 staging store: staging bucket is empty; set the staging bucket name")
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := s3.Options{
		Region:       region,
		UsePathStyle: cfg.PathStyle,
		// Third-party S3 services reject the newer default checksums on some calls.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	} else {
		def, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
		if err != nil {
			return nil, fmt.Errorf("opening S3 staging bucket %s: loading AWS credentials: %w", cfg.Bucket, err)
		}
		opts.Credentials = def.Credentials
	}
	client := s3.New(opts)
	b, err := s3blob.OpenBucket(ctx, client, cfg.Bucket, &s3blob.Options{
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
	if err != nil {
		return nil, fmt.Errorf("opening S3 staging bucket %s: %w", cfg.Bucket, err)
	}
	base := "s3://" + cfg.Bucket + "/"
	if p := strings.Trim(cfg.Prefix, "/"); p != "" {
		b = blob.PrefixedBucket(b, p+"/")
		base += p + "/"
	}
	return &Store{bucket: b, base: base}, nil
}

// Close releases the store's resources.
func (s *Store) Close() error {
	if err := s.bucket.Close(); err != nil {
		return fmt.Errorf("closing staging store %s: %w", s.base, err)
	}
	return nil
}

// URI returns the URI of the store's root.
func (s *Store) URI() string { return s.base }

// Put stages the batch that data holds under the name ref's table, source, lo and hi determine,
// and returns ref with URI and Bytes set. Putting the same range again overwrites the earlier
// file (a reader that restarted re-stages what it had staged), so Put is idempotent. The object
// appears whole or not at all.
func (s *Store) Put(ctx context.Context, ref BatchRef, data io.Reader) (BatchRef, error) {
	if err := ref.Validate(); err != nil {
		return BatchRef{}, fmt.Errorf("staging batch: %w", err)
	}
	name := objectName(ref)
	// Cancelling the writer's context is how gocloud aborts a write: the partial object never
	// appears.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, name, &blob.WriterOptions{
		ContentType: "application/vnd.apache.arrow.file",
		Metadata:    objectMetadata(ref),
		BeforeWrite: privateFile,
	})
	if err != nil {
		return BatchRef{}, fmt.Errorf("staging batch %s: %w", ref, err)
	}
	n, err := io.Copy(w, data)
	if err != nil {
		cancel()
		_ = w.Close() // reports the cancellation; the copy error is the one to return
		return BatchRef{}, fmt.Errorf("staging batch %s: writing %s: %w", ref, name, err)
	}
	if err := w.Close(); err != nil {
		return BatchRef{}, fmt.Errorf("staging batch %s: closing %s: %w", ref, name, err)
	}
	if s.dir != "" { // the metadata sidecar, created with the umask's mode
		if err := os.Chmod(filepath.Join(s.dir, filepath.FromSlash(name))+".attrs", fileMode); err != nil && !errors.Is(err, os.ErrNotExist) {
			return BatchRef{}, fmt.Errorf("staging batch %s: making %s.attrs private: %w", ref, name, err)
		}
	}
	ref.URI = s.base + name
	ref.Bytes = n
	return ref, nil
}

// objectMetadata is the metadata staged with ref's object, from which a listing rebuilds it.
func objectMetadata(ref BatchRef) map[string]string {
	m := map[string]string{metaRows: strconv.FormatInt(ref.Rows, 10), metaPhase: string(ref.Phase)}
	if !ref.FirstCommit.IsZero() {
		m[metaFirstCommit] = ref.FirstCommit.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// key returns the object name of ref within the store, checking that its URI points here.
func (s *Store) key(ref BatchRef) (string, error) {
	name := objectName(ref)
	if ref.URI != "" && ref.URI != s.base+name {
		return "", fmt.Errorf("batch %s has URI %s, expected %s%s: %w (configure the same staging location on every worker)",
			ref, ref.URI, s.base, name, ErrForeignURI)
	}
	return name, nil
}

// ReadAll returns the staged file of ref. It returns an error wrapping ErrNotFound when the
// batch is not staged (anymore).
func (s *Store) ReadAll(ctx context.Context, ref BatchRef) ([]byte, error) {
	name, err := s.key(ref)
	if err != nil {
		return nil, fmt.Errorf("reading staged batch: %w", err)
	}
	data, err := s.bucket.ReadAll(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("reading staged batch %s: %w", ref, s.classify(err))
	}
	return data, nil
}

// Open returns a reader of ref's staged file that the caller closes. It returns an error
// wrapping ErrNotFound when the batch is not staged (anymore).
func (s *Store) Open(ctx context.Context, ref BatchRef) (io.ReadCloser, error) {
	name, err := s.key(ref)
	if err != nil {
		return nil, fmt.Errorf("opening staged batch: %w", err)
	}
	r, err := s.bucket.NewReader(ctx, name, nil)
	if err != nil {
		return nil, fmt.Errorf("opening staged batch %s: %w", ref, s.classify(err))
	}
	return r, nil
}

// OpenReaderAt reads ref's staged file into memory and returns it as an io.ReaderAt and size, the
// shape Arrow's IPC file reader needs.
func (s *Store) OpenReaderAt(ctx context.Context, ref BatchRef) (*bytes.Reader, error) {
	data, err := s.ReadAll(ctx, ref)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(data), nil
}

// Acknowledge deletes ref's staged file after its batch is committed. Acknowledging a batch that
// is already gone succeeds, so Acknowledge is idempotent.
func (s *Store) Acknowledge(ctx context.Context, ref BatchRef) error {
	name, err := s.key(ref)
	if err != nil {
		return fmt.Errorf("acknowledging staged batch: %w", err)
	}
	if err := s.bucket.Delete(ctx, name); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("acknowledging staged batch %s: %w", ref, err)
	}
	return nil
}

func (s *Store) classify(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// refFromListing rebuilds a BatchRef from a listed object; withAttrs reads its metadata (rows and
// phase), which costs one request per object.
func (s *Store) refFromListing(ctx context.Context, obj *blob.ListObject, withAttrs bool) (BatchRef, error) {
	ref, err := parseObjectName(obj.Key)
	if err != nil {
		return BatchRef{}, err
	}
	return s.listedRef(ctx, ref, obj.Key, obj.Size, withAttrs)
}

// listedRef completes the ref parsed from a listed object's key: its URI, size and phase, and with
// withAttrs its metadata (rows and phase), which costs one request per object.
func (s *Store) listedRef(ctx context.Context, ref BatchRef, key string, size int64, withAttrs bool) (BatchRef, error) {
	ref.URI = s.base + key
	ref.Bytes = size
	ref.Phase = batch.PhaseStream
	if !withAttrs {
		return ref, nil
	}
	attrs, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return BatchRef{}, fmt.Errorf("reading attributes of staged batch %s: %w", ref, s.classify(err))
	}
	return withMetadata(ref, attrs.Metadata)
}

// withMetadata sets ref's rows, phase and first commit time from its object's metadata.
func withMetadata(ref BatchRef, meta map[string]string) (BatchRef, error) {
	if v, ok := meta[metaRows]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return BatchRef{}, fmt.Errorf("staged batch %s: rows metadata %q: %w", ref, v, err)
		}
		ref.Rows = n
	}
	if v := meta[metaPhase]; v != "" {
		ref.Phase = batch.Phase(v)
	}
	if v := meta[metaFirstCommit]; v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return BatchRef{}, fmt.Errorf("staged batch %s: first commit metadata %q: %w", ref, v, err)
		}
		ref.FirstCommit = t
	}
	return ref, nil
}
