package remote

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memtier/memtier/runtime/errs"
)

// iniFile is a parsed AWS shared credentials or config file: section name to
// lower-case key to value. A nested property ("s3 =" followed by indented
// "endpoint_url = ..." lines) is stored as "s3.endpoint_url".
type iniFile map[string]map[string]string

// parseINI parses the INI dialect the AWS CLI writes: "[section]" headers,
// "key = value" (or "key: value") lines, full-line comments starting with
// '#' or ';', and indented sub-properties under a key with an empty value.
// Inline comments are not stripped (a secret may hold any character). Lines
// outside a section, or without '=', are ignored as botocore does for a
// malformed file it can still use.
func parseINI(data []byte) iniFile {
	out := iniFile{}
	var sec map[string]string
	parent := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		raw := strings.TrimSuffix(sc.Text(), "\r")
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				sec = nil
				continue
			}
			name := strings.Join(strings.Fields(line[1:end]), " ")
			if out[name] == nil {
				out[name] = map[string]string{}
			}
			sec, parent = out[name], ""
			continue
		}
		if sec == nil {
			continue
		}
		eq := strings.IndexAny(line, "=:")
		if eq < 0 {
			continue
		}
		key := strings.ToLower(strings.TrimSpace(line[:eq]))
		val := strings.TrimSpace(line[eq+1:])
		indented := raw != "" && (raw[0] == ' ' || raw[0] == '\t')
		switch {
		case indented && parent != "":
			sec[parent+"."+key] = val
		case val == "":
			parent = key
		default:
			sec[key], parent = val, ""
		}
	}
	return out
}

// profile is one profile's settings, merged from the credentials file
// (which wins, as in the AWS CLI) and the config file.
type profile struct {
	name     string
	found    bool              // in either file
	settings map[string]string // lower-case keys
}

// sharedFiles returns the credentials and config file paths: the
// AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE overrides, else
// ~/.aws/credentials and ~/.aws/config ("" when no home is known).
func sharedFiles(getenv func(string) string) (credFile, confFile string) {
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	credFile, confFile = getenv("AWS_SHARED_CREDENTIALS_FILE"), getenv("AWS_CONFIG_FILE")
	if credFile == "" && home != "" {
		credFile = filepath.Join(home, ".aws", "credentials")
	}
	if confFile == "" && home != "" {
		confFile = filepath.Join(home, ".aws", "config")
	}
	return credFile, confFile
}

// loadProfile reads profile name from the shared files. A missing file is
// not an error (found stays false); an unreadable one is (errs.Permission or
// errs.IO naming the file).
func loadProfile(getenv func(string) string, name string) (profile, error) {
	p := profile{name: name, settings: map[string]string{}}
	credFile, confFile := sharedFiles(getenv)
	// Config first, so the credentials file overrides it.
	confSection := "profile " + name
	if name == "default" {
		confSection = "default"
	}
	for _, f := range []struct{ path, section string }{{confFile, confSection}, {credFile, name}} {
		if f.path == "" {
			continue
		}
		data, err := os.ReadFile(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return p, errs.FromErrno("read AWS shared file", f.path, -1, err)
		}
		ini := parseINI(data)
		sec, ok := ini[f.section]
		if !ok && f.section == "default" {
			sec, ok = ini["profile default"]
		}
		if !ok {
			continue
		}
		p.found = true
		for k, v := range sec {
			p.settings[k] = v
		}
	}
	return p, nil
}
