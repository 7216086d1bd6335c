package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LogConfigKind is how the workers read a --log-config file, by its
// name: "json" (.json) and "yaml" (.yaml, .yml) are logging.config.dictConfig
// dictionaries, anything else an .ini file for logging.config.fileConfig
// (gunicorn's --log-config; its --log-config-json is the JSON form).
func LogConfigKind(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return "json"
	case ".yaml", ".yml":
		return "yaml"
	}
	return "ini"
}

// CheckLogConfig is what the master can tell of a --log-config file
// without Python, for a one-line refusal (exit 2): the file reads; a JSON
// one is a JSON object with "version" 1 (logging.config.dictConfig's one
// schema version); an .ini one has the [loggers], [handlers] and
// [formatters] sections fileConfig reads. The rest (a handler class that
// does not import, a YAML file without PyYAML) fails the workers' start,
// in a record that names the file.
func CheckLogConfig(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--log-config %s: %v", path, err)
	}
	switch LogConfigKind(path) {
	case "json":
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("--log-config %s: not a JSON object: %v", path, err)
		}
		if v, ok := m["version"].(float64); !ok || v != 1 {
			return fmt.Errorf("--log-config %s: want \"version\": 1 (logging.config.dictConfig's schema)", path)
		}
	case "ini":
		for _, sec := range []string{"[loggers]", "[handlers]", "[formatters]"} {
			if !bytes.Contains(data, []byte(sec)) {
				return fmt.Errorf("--log-config %s: no %s section (logging.config.fileConfig reads an .ini file with [loggers], [handlers] and [formatters]; a dictConfig file ends in .json, .yaml or .yml)", path, sec)
			}
		}
	}
	return nil
}
