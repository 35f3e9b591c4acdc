package staging

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The query parameters of an s3:// staging URL, in the order the docs list them.
const (
	// ParamEndpoint is an S3-compatible service's URL; empty means AWS.
	ParamEndpoint = "endpoint"
	// ParamRegion is the bucket's region; us-east-1 when empty.
	ParamRegion = "region"
	// ParamPathStyle is true or false: path-style addressing, true by default with an endpoint.
	ParamPathStyle = "path_style"
)

// S3URLParams lists the query parameters an s3:// staging URL may carry. The config validator
// and Open both check a URL against it, so the two can never disagree.
func S3URLParams() []string { return []string{ParamEndpoint, ParamRegion, ParamPathStyle} }

// CheckS3Query reports the first problem of an s3:// staging URL's query: a parameter that is
// not one of S3URLParams (a misspelt one would otherwise be ignored silently), a parameter
// given twice, or a path_style that is not true or false. Its errors never repeat the URL.
func CheckS3Query(q url.Values) error {
	known := S3URLParams()
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !slices.Contains(known, k) {
			return fmt.Errorf("unknown query parameter %q; the parameters are %s", k, strings.Join(known, ", "))
		}
		if len(q[k]) > 1 {
			return fmt.Errorf("query parameter %q is given %d times; give it once", k, len(q[k]))
		}
	}
	if v := q.Get(ParamPathStyle); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("query parameter path_style=%q: want true or false", v)
		}
	}
	return nil
}

// s3ConfigFromURL returns the S3Config of a parsed s3:// staging URL, checking its query first.
func s3ConfigFromURL(u *url.URL, accessKey, secretKey string) (S3Config, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return S3Config{}, fmt.Errorf("query: %w", err)
	}
	if err := CheckS3Query(q); err != nil {
		return S3Config{}, err
	}
	cfg := S3Config{
		Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: q.Get(ParamEndpoint), Region: q.Get(ParamRegion),
		AccessKeyID: accessKey, SecretAccessKey: secretKey, PathStyle: q.Get(ParamEndpoint) != "",
	}
	if v := q.Get(ParamPathStyle); v != "" {
		cfg.PathStyle, _ = strconv.ParseBool(v) // checked above
	}
	return cfg, nil
}
