package credfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// format is how a credential file is written.
type format int

const (
	ini    format = iota // key = value lines, [sections], # and ; comments (.pypirc, pip.conf)
	npmrc                // key=value lines, keys scoped as //host/path/:key
	toml                 // cargo's credentials: key = "value" lines, [tables]
	docker               // a JSON document
)

// files are the credential files of a home, relative to it.
var files = []struct {
	rel string
	f   format
}{
	{".npmrc", npmrc},
	{".pypirc", ini},
	{".config/pip/pip.conf", ini},
	{".pip/pip.conf", ini},
	{".docker/config.json", docker},
	{".cargo/credentials", toml},
	{".cargo/credentials.toml", toml},
}

// Files returns the credential files of a home that keep their settings,
// relative to it.
func Files() []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.rel
	}
	return out
}

// MaxSize is the largest credential file copied; a larger one is hidden
// whole.
const MaxSize = 1 << 20

// ErrUnparsable is wrapped when a file cannot be sanitized: it is then
// hidden whole.
var ErrUnparsable = errors.New("credential file cannot be sanitized")

func formatOf(name string) (format, bool) {
	for _, f := range files {
		if name == f.rel || strings.HasSuffix(name, "/"+f.rel) {
			return f.f, true
		}
	}
	return 0, false
}

// Sanitize returns data, the content of credential file name (a path
// ending in one of Files), without its secrets, and whether it held any.
func Sanitize(name string, data []byte) (out []byte, removed bool, err error) {
	f, ok := formatOf(name)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s is not a known credential file", ErrUnparsable, name)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, false, fmt.Errorf("%w: %s is not text", ErrUnparsable, name)
	}
	if f == docker {
		return sanitizeJSON(name, data)
	}
	return sanitizeLines(name, data, f)
}

// secretKey reports whether a setting named key holds a secret.
func secretKey(key string) bool {
	k := strings.ToLower(strings.Trim(strings.TrimSpace(key), `"'`))
	if k == "auth" || k == "_auth" {
		return true
	}
	for _, s := range []string{"token", "password", "passwd", "secret", "_auth"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// userinfo matches the user information of a URL: scheme://user:password@.
// Compiled when first used, not at every process start (about 0.1 ms).
var userinfo = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s"']*@`)
})

func stripUserinfo(s string) (string, bool) {
	out := userinfo().ReplaceAllString(s, "$1")
	return out, out != s
}

// sanitizeLines drops the lines that set a secret (and their continuation
// lines) and the user information of every URL.
func sanitizeLines(name string, data []byte, f format) ([]byte, bool, error) {
	var out []string
	removed, dropping := false, false
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		t := strings.TrimSpace(line)
		cont := f == ini && t != "" && (line[0] == ' ' || line[0] == '\t')
		switch {
		case cont:
			if dropping {
				removed = true
				continue
			}
		case t == "" || t[0] == '#' || t[0] == ';' || t[0] == '[':
			dropping = false
		default:
			key, value, ok := cutSetting(t, f)
			if !ok {
				return nil, false, fmt.Errorf("%w: %s:%d: not a setting", ErrUnparsable, name, i+1)
			}
			if f == toml && (strings.HasPrefix(value, `"""`) || strings.HasPrefix(value, "'''") || strings.HasPrefix(value, "{") || strings.HasPrefix(value, "[")) {
				return nil, false, fmt.Errorf("%w: %s:%d: a multi-line or inline value", ErrUnparsable, name, i+1)
			}
			dropping = secretSetting(key, f)
			if dropping {
				removed = true
				continue
			}
		}
		l, stripped := stripUserinfo(line)
		removed = removed || stripped
		out = append(out, l)
	}
	return []byte(strings.Join(out, "")), removed, nil
}

// cutSetting splits a setting line into its key and value.
func cutSetting(t string, f format) (key, value string, ok bool) {
	sep := "="
	if f == ini && strings.IndexByte(t, ':') >= 0 && (strings.IndexByte(t, '=') < 0 || strings.IndexByte(t, ':') < strings.IndexByte(t, '=')) {
		sep = ":"
	}
	if f == npmrc && strings.HasPrefix(t, "//") {
		// //host/path/:key=value: the key follows the last ":" before "=".
		eq := strings.IndexByte(t, '=')
		if eq < 0 {
			return "", "", false
		}
		scoped := t[:eq]
		return scoped[strings.LastIndexByte(scoped, ':')+1:], strings.TrimSpace(t[eq+1:]), true
	}
	key, value, ok = strings.Cut(t, sep)
	return strings.TrimSpace(key), strings.TrimSpace(value), ok && strings.TrimSpace(key) != ""
}

// secretSetting reports whether key sets a secret; a TOML dotted key does
// when any of its parts does.
func secretSetting(key string, f format) bool {
	if f == toml {
		for _, part := range strings.Split(key, ".") {
			if secretKey(part) {
				return true
			}
		}
		return false
	}
	return secretKey(key)
}

// jsonSecrets are the keys of a Docker config that hold a secret.
var jsonSecrets = map[string]bool{"auth": true, "identitytoken": true, "registrytoken": true, "password": true, "token": true}

func sanitizeJSON(name string, data []byte) ([]byte, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrUnparsable, name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, fmt.Errorf("%w: %s: data after the document", ErrUnparsable, name)
	}
	removed := false
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if jsonSecrets[strings.ToLower(k)] {
					delete(x, k)
					removed = true
					continue
				}
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			s, stripped := stripUserinfo(x)
			removed = removed || stripped
			return s
		}
		return v
	}
	v = walk(v)
	out, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrUnparsable, name, err)
	}
	return append(out, '\n'), removed, nil
}

// Copy writes the sanitized copy of credential file p into dir, a private
// directory of the caller's, and returns its path: read-only, named after
// p. A file that cannot be read or sanitized gets no copy (an error).
func Copy(p, dir string) (string, error) {
	data, err := Read(p)
	if err != nil {
		return "", err
	}
	out, _, err := Sanitize(p, data)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, strings.TrimPrefix(path.Base(p), ".")+"-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, werr := f.Write(out)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(name, 0o444)); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}
