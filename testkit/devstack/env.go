package devstack

// Env returns the environment variables that point Sluice and its tools at a started service.
func Env(info Info) map[string]string {
	switch info.Service {
	case ServicePostgres:
		return map[string]string{"SLUICE_PG_DSN": info.URL}
	case ServiceTemporal:
		return map[string]string{"TEMPORAL_ADDRESS": info.Addr, "SLUICE_TEMPORAL_UI": info.Extra["ui"]}
	case ServiceClickHouse:
		return map[string]string{"SLUICE_CLICKHOUSE_ADDR": info.Addr}
	case ServiceCouchbase:
		return map[string]string{"SLUICE_COUCHBASE_CONNSTR": info.URL}
	case ServiceWeed:
		return map[string]string{"SLUICE_ICEBERG_REST_URI": info.URL, "SLUICE_S3_ENDPOINT": info.Extra["s3_endpoint"]}
	}
	return nil
}
