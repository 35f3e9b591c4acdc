package staging

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// Open opens the staging store a pipeline's `staging.url` names: a directory path, a file://
// URL, or s3://bucket/prefix with optional query parameters (S3URLParams) endpoint (an
// S3-compatible service's URL), region and path_style (true or false; true by default when
// endpoint is set); any other parameter is an error.
// Credentials are not part of the URL: accessKey and secretKey are used when set, else the AWS
// SDK's default chain (AWS_ACCESS_KEY_ID, ...).
func Open(ctx context.Context, rawURL, accessKey, secretKey string) (*Store, error) {
	if !strings.Contains(rawURL, "://") {
		return OpenDir(ctx, rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("staging url %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		return OpenDir(ctx, u.Path)
	case "s3":
		cfg, err := s3ConfigFromURL(u, accessKey, secretKey)
		if err != nil {
			return nil, fmt.Errorf("staging url %q: %w", rawURL, err)
		}
		return OpenS3(ctx, cfg)
	}
	return nil, fmt.Errorf("staging url %q: scheme %q is not supported: use a directory, file:// or s3://", rawURL, u.Scheme)
}
