package config

import (
	"os"
	"reflect"
	"strings"
)

// SecretFileSuffix ends the key of a setting that names a file holding a secret: the key without
// it is the secret (source.dsn_file holds source.dsn), so Docker and Kubernetes secrets, which
// are files, need no copy into the config or the environment. SLUICE_SOURCE_DSN_FILE sets
// source.dsn_file as any key's variable does.
const SecretFileSuffix = "_file"

// readSecretFiles replaces every set <key>_file setting by the content of the file it names,
// put in <key> (one trailing newline removed), and clears the _file setting, so a config holds
// each secret once and reading twice is harmless. Setting both <key> and <key>_file is a
// problem, as is a file that cannot be read; no message repeats a file's content.
func (v *validator) readSecretFiles(c *Config) {
	v.secretFiles("", reflect.ValueOf(c).Elem())
}

// secretFiles walks the struct out at path (pointers followed, lists left out: no secret lives
// in a list).
func (v *validator) secretFiles(path string, out reflect.Value) {
	t := out.Type()
	for _, f := range keyFields(t) {
		key := jsonKey(f)
		fv := out.FieldByIndex(f.Index)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() || fv.Elem().Kind() != reflect.Struct {
				continue
			}
			fv = fv.Elem()
		}
		if fv.Kind() == reflect.Struct && !reflect.PointerTo(fv.Type()).Implements(rawDecoderType) {
			v.secretFiles(joinKey(path, key), fv)
			continue
		}
		secretKey, ok := strings.CutSuffix(key, SecretFileSuffix)
		if !ok || fv.Kind() != reflect.String || fv.String() == "" {
			continue
		}
		j, ok := fieldIndex(t, secretKey)
		if !ok || out.FieldByIndex(j).Kind() != reflect.String {
			continue // a file setting of its own, such as temporal.tls.ca_file
		}
		p := joinKey(path, key)
		if out.FieldByIndex(j).String() != "" {
			v.ps.add(p, "both %s and %s are set; keep one (the file is for secrets mounted as files)", joinKey(path, secretKey), p)
			continue
		}
		data, err := os.ReadFile(fv.String())
		if err != nil {
			v.ps.add(p, "cannot read the secret file: %v; mount the file or fix the path", err)
			continue
		}
		secret := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if strings.TrimSpace(secret) == "" {
			v.ps.add(p, "the file %s is empty; write the secret into it", fv.String())
			continue
		}
		out.FieldByIndex(j).SetString(secret)
		fv.SetString("")
	}
}
