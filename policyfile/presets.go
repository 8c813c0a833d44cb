package policyfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	toml "github.com/pelletier/go-toml/v2"
)

// Presets are the toolchains a preset names.
func Presets() []string { return []string{"go", "java", "node", "python", "rust"} }

// presetTimeout bounds each query of a tool's configuration.
const presetTimeout = 2 * time.Second

// Preset is what a toolchain preset resolved to: the hosts of the
// registries the tool is configured to use, read from the tool's own
// configuration when the command starts (never a name of ours), and where
// each was read.
type Preset struct {
	Name    string   `json:"name"`
	Domains []string `json:"domains"`
	// From says where the domains were read ("go env GOPROXY GOSUMDB").
	From string `json:"from,omitempty"`
	// Note says what the preset could not read, or left out.
	Note string `json:"note,omitempty"`
}

// ResolvePresets reads each named toolchain's configuration, running its
// own tools (go env, npm config, pip config; each bounded to 2 s) with
// environ, outside any sandbox, and reading its files (cargo's config.toml,
// Maven's settings.xml) under environ's HOME. A tool that is missing, or
// says nothing, gives a preset without domains and a note, not an error.
func ResolvePresets(names []string, environ []string) []Preset {
	var out []Preset
	for _, name := range names {
		var p Preset
		switch name {
		case "go":
			p = goPreset(environ)
		case "node":
			p = nodePreset(environ)
		case "python":
			p = pythonPreset(environ)
		case "rust":
			p = rustPreset(environ)
		case "java":
			p = javaPreset(environ)
		default:
			p = Preset{Note: fmt.Sprintf("not one of %s", strings.Join(Presets(), ", "))}
		}
		p.Name = name
		if p.Domains == nil {
			p.Domains = []string{}
		}
		out = append(out, p)
	}
	return out
}

// query runs argv with environ and returns its standard output.
func query(environ []string, argv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), presetTimeout)
	defer cancel()
	// Found on the caller's PATH, not ours.
	bin := ""
	path, _ := lookup(environ, "PATH")
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, argv[0]); filepath.IsAbs(p) && isExecutable(p) {
			bin = p
			break
		}
	}
	if bin == "" {
		return nil, fmt.Errorf("%s is not installed (not on PATH)", argv[0])
	}
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	cmd.Env = environ
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg != "" {
			return nil, fmt.Errorf("%s: %w (%s)", strings.Join(argv, " "), err, msg)
		}
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return out, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func lookup(environ []string, key string) (string, bool) {
	for _, e := range slices.Backward(environ) {
		if k, v, ok := strings.Cut(e, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// hostOf is the host name of a registry URL ("sparse+https://h/x": "h"),
// or "" for anything else (a file:// path, "direct", "off").
func hostOf(raw string) string {
	raw = strings.TrimSpace(raw)
	for _, pre := range []string{"sparse+", "registry+", "git+"} {
		raw = strings.TrimPrefix(raw, pre)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	return u.Hostname()
}

// add appends the hosts of urls to p.Domains, once each.
func (p *Preset) add(urls ...string) {
	for _, u := range urls {
		if h := hostOf(u); h != "" && !slices.Contains(p.Domains, h) {
			p.Domains = append(p.Domains, h)
		}
	}
}

func goPreset(environ []string) Preset {
	p := Preset{From: "go env GOPROXY GOSUMDB"}
	out, err := query(environ, "go", "env", "GOPROXY", "GOSUMDB")
	if err != nil {
		p.Note = err.Error()
		return p
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 0 {
		for _, e := range strings.FieldsFunc(lines[0], func(r rune) bool { return r == ',' || r == '|' }) {
			if e == "direct" {
				p.Note = "GOPROXY ends in direct: modules the proxy lacks come from their own hosts, which the preset does not allow"
			}
			p.add(e)
		}
	}
	if len(lines) > 1 {
		// "off", "name", "name+key" or "name+key URL"
		switch f := strings.Fields(lines[1]); {
		case len(f) == 0 || f[0] == "off":
		case len(f) > 1:
			p.add(f[1])
		default:
			name, _, _ := strings.Cut(f[0], "+")
			p.add("https://" + name)
		}
	}
	return p
}

func nodePreset(environ []string) Preset {
	p := Preset{From: "npm config list --json"}
	out, err := query(environ, "npm", "config", "list", "--json")
	if err != nil {
		p.Note = err.Error()
		return p
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		p.Note = "npm config list --json: " + err.Error()
		return p
	}
	if r, ok := cfg["registry"].(string); ok {
		p.add(r)
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if r, ok := cfg[k].(string); ok && strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry") {
			p.add(r) // a scope's registry
		}
	}
	return p
}

func pythonPreset(environ []string) Preset {
	p := Preset{From: "pip config list"}
	out, err := query(environ, "python3", "-m", "pip", "config", "list")
	if err != nil {
		p.Note = err.Error()
		return p
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		if strings.HasSuffix(key, ".index-url") || strings.HasSuffix(key, ".extra-index-url") {
			p.add(strings.Fields(strings.Trim(val, `'"`))...)
		}
	}
	if len(p.Domains) > 0 {
		return p
	}
	// No index configured: pip's own default, and where it serves files.
	p.From = "pip's default index (pip._internal.models.index.PyPI)"
	out, err = query(environ, "python3", "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url); print('https://' + PyPI.file_storage_domain)")
	if err != nil {
		p.Note = err.Error()
		return p
	}
	p.add(strings.Fields(string(out))...)
	return p
}

func rustPreset(environ []string) Preset {
	home, _ := lookup(environ, "CARGO_HOME")
	if home == "" {
		h, _ := lookup(environ, "HOME")
		home = filepath.Join(h, ".cargo")
	}
	p := Preset{From: filepath.Join(home, "config.toml")}
	for _, e := range environ {
		if k, v, ok := strings.Cut(e, "="); ok && strings.HasPrefix(k, "CARGO_REGISTRIES_") && strings.HasSuffix(k, "_INDEX") {
			p.add(v)
		}
	}
	var cfg struct {
		Registries map[string]struct {
			Index string `toml:"index"`
		} `toml:"registries"`
		Source map[string]struct {
			Registry    string `toml:"registry"`
			ReplaceWith string `toml:"replace-with"`
		} `toml:"source"`
	}
	replaced := false
	for _, name := range []string{"config.toml", "config"} {
		b, err := os.ReadFile(filepath.Join(home, name))
		if err != nil {
			continue
		}
		if err := toml.Unmarshal(b, &cfg); err != nil {
			p.Note = filepath.Join(home, name) + ": " + err.Error()
			return p
		}
		p.From = filepath.Join(home, name)
		break
	}
	for _, r := range cfg.Registries {
		p.add(r.Index)
	}
	for name, s := range cfg.Source {
		p.add(s.Registry)
		if name == "crates-io" && s.ReplaceWith != "" {
			replaced = true
		}
	}
	slices.Sort(p.Domains)
	if !replaced {
		p.Note = "crates.io, cargo's built-in registry, is not in its configuration: allow its index and downloads with allow_domain"
	}
	return p
}

func javaPreset(environ []string) Preset {
	h, _ := lookup(environ, "HOME")
	path := filepath.Join(h, ".m2", "settings.xml")
	p := Preset{From: path}
	b, err := os.ReadFile(path)
	if err != nil {
		p.Note = "no " + path + ": Maven's built-in repository is not in its configuration: allow it with allow_domain"
		return p
	}
	var s struct {
		Mirrors []struct {
			URL string `xml:"url"`
		} `xml:"mirrors>mirror"`
		Repositories []struct {
			URL string `xml:"url"`
		} `xml:"profiles>profile>repositories>repository"`
		PluginRepositories []struct {
			URL string `xml:"url"`
		} `xml:"profiles>profile>pluginRepositories>pluginRepository"`
	}
	if err := xml.Unmarshal(b, &s); err != nil {
		p.Note = path + ": " + err.Error()
		return p
	}
	for _, m := range s.Mirrors {
		p.add(m.URL)
	}
	for _, r := range s.Repositories {
		p.add(r.URL)
	}
	for _, r := range s.PluginRepositories {
		p.add(r.URL)
	}
	if len(s.Mirrors) == 0 {
		p.Note = "no mirror in " + path + ": Maven's built-in repository is not in its configuration: allow it with allow_domain"
	}
	return p
}
