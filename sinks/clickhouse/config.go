package clickhouse

import "github.com/sluicecdc/sluice/config"

// Config is the sink.clickhouse section of a pipeline's configuration. It is defined, defaulted
// and validated once, in package config; New validates the Config it is given with
// config.ClickHouse.Validate, so one built in Go meets the rules of a config file. Its Schema is
// one of config.SchemaAuto, config.SchemaModern and config.SchemaCompatible.
type Config = config.ClickHouse
