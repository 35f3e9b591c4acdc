package testenv

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3Info is where to reach an S3-compatible store and with which credentials. Bucket exists.
type S3Info struct {
	Endpoint        string // http://127.0.0.1:port
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	Bucket          string
}

// Client returns an AWS SDK client for the store (path-style addressing).
func (i S3Info) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(i.Endpoint),
		Region:       i.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(i.AccessKeyID, i.SecretAccessKey, ""),
		UsePathStyle: true,
	})
}

// S3 starts an in-process S3-compatible server (gofakes3, in memory) for the test, with one
// fresh bucket, and stops it at cleanup.
func S3(t testing.TB) S3Info {
	t.Helper()
	faker := gofakes3.New(s3mem.New())
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	info := S3Info{
		Endpoint:        srv.URL,
		Region:          "us-east-1",
		AccessKeyID:     "sluice",
		SecretAccessKey: "sluice-secret",
		Bucket:          RandomName("sluice-test-"),
	}
	if _, err := info.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(info.Bucket)}); err != nil {
		t.Fatalf("testenv: s3: creating bucket %s: %v", info.Bucket, err)
	}
	return info
}
