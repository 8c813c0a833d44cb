package policyfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Error is a policy file's bad input: the file, the line and the key it
// is about (Key is "" for a syntax error).
type Error struct {
	File string
	Line int
	Key  string
	Err  error
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Origin is where a setting came from: a file's line (in a profile, or at
// the top level when Profile is ""), a toolchain preset, or a flag.
type Origin struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Profile string `json:"profile,omitempty"`
	// Preset names the toolchain preset an entry came from (File is then
	// "").
	Preset string `json:"preset,omitempty"`
	// Flag is true for a command-line flag.
	Flag bool `json:"flag,omitempty"`
}

func (o Origin) String() string {
	if o.Preset != "" {
		return "preset " + o.Preset
	}
	if o.File == "" {
		return "flag"
	}
	s := fmt.Sprintf("%s:%d", o.File, o.Line)
	if o.Profile != "" {
		s += " (profile " + o.Profile + ")"
	}
	return s
}

// Options say which files Load reads.
type Options struct {
	// UserFile is the user's policy file ("": none; missing: none). See
	// Dirs.
	UserFile string
	// ProjectDir is the workspace whose ProjectFile applies when the user
	// trusted it (recorded in TrustDir); "": none.
	ProjectDir string
	TrustDir   string
	// Profile is the profile to apply besides each file's top level ("":
	// none). It must exist in a file read.
	Profile string
	// Home expands a leading "~/" in the files' paths ("": not expanded).
	Home string
}

// Policy is what Load read: the merged settings, and where each came from.
type Policy struct {
	Settings
	// Origins lists, for each key set, the files' lines that set it, in
	// the order they applied.
	Origins map[string][]Origin
	// Files are the files applied, in order.
	Files []string
	// Untrusted, when not "", says why a project file that exists was not
	// applied (one line, naming how to trust it).
	Untrusted string
}

// document is a policy file: the top level's settings and the profiles.
type document struct {
	Settings
	Profiles map[string]profile `toml:"profiles"`
}

type profile struct {
	Settings
	Extends string `toml:"extends"`
}

// layer is one set of settings to apply, and where it stands.
type layer struct {
	settings *Settings
	file     string
	profile  string
	lines    map[string]int // full dotted key → line
}

// Load reads the user's file and, when trusted, the project's, and merges
// them: each file's top level, then its profile's extends chain, then the
// profile; the project file after the user's. A scalar set later replaces
// one set earlier; a list set later adds its entries. A file's bad input
// is an *Error.
func Load(o Options) (*Policy, error) {
	p := &Policy{Origins: map[string][]Origin{}}
	var layers []layer
	found := o.Profile == ""
	if o.UserFile != "" {
		data, err := os.ReadFile(o.UserFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("policy file: %w", err)
		default:
			ls, has, err := parse(o.UserFile, data, o, false)
			if err != nil {
				return nil, err
			}
			layers, found = append(layers, ls...), found || has
			p.Files = append(p.Files, o.UserFile)
		}
	}
	if o.ProjectDir != "" {
		data, path, err := ReadProject(o.ProjectDir)
		var pe *os.PathError
		switch {
		case errors.As(err, &pe):
			// No project file to read (a workspace that is not a
			// directory, or cannot be opened, is the run's own error).
		case err != nil:
			p.Untrusted = fmt.Sprintf("%s is not applied: %v", filepath.Join(o.ProjectDir, ProjectFile), err)
		default:
			if why := untrusted(o.TrustDir, path, data); why != "" {
				p.Untrusted = fmt.Sprintf("%s is not trusted (%s); to apply it, run: dsh-sandbox-run trust --workspace %s", path, why, o.ProjectDir)
				break
			}
			ls, has, err := parse(path, data, o, true)
			if err != nil {
				return nil, err
			}
			layers, found = append(layers, ls...), found || has
			p.Files = append(p.Files, path)
		}
	}
	if !found {
		where := "no policy file"
		if len(p.Files) > 0 {
			where = strings.Join(p.Files, ", ")
		}
		return nil, fmt.Errorf("profile %q: not in %s", o.Profile, where)
	}
	for _, l := range layers {
		for _, k := range p.merge(l.settings) {
			key := k
			if l.profile != "" {
				key = "profiles." + l.profile + "." + k
			}
			at := Origin{File: l.file, Line: l.lines[key], Profile: l.profile}
			if _, list := p.Value(k).([]string); list {
				p.Origins[k] = append(p.Origins[k], at)
			} else {
				p.Origins[k] = []Origin{at}
			}
		}
	}
	return p, nil
}

// parse decodes and checks one file, returning its layers for profile
// o.Profile and whether the file defines that profile.
func parse(file string, data []byte, o Options, project bool) ([]layer, bool, error) {
	var doc document
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, false, decodeError(file, err)
	}
	lines := keyLines(data)
	bad := func(key string, err error) error {
		return &Error{File: file, Line: lines[key], Key: key, Err: err}
	}
	dir := ""
	if project {
		dir = filepath.Dir(file)
	}
	if err := check(&doc.Settings, "", dir, o.Home, bad); err != nil {
		return nil, false, err
	}
	for name, pr := range doc.Profiles {
		if err := check(&pr.Settings, "profiles."+name+".", dir, o.Home, bad); err != nil {
			return nil, false, err
		}
		doc.Profiles[name] = pr
	}
	layers := []layer{{settings: &doc.Settings, file: file, lines: lines}}
	if o.Profile == "" {
		return layers, false, nil
	}
	if _, ok := doc.Profiles[o.Profile]; !ok {
		return layers, false, nil
	}
	var chain []string
	for name := o.Profile; name != ""; {
		if slices.Contains(chain, name) {
			return nil, false, bad("profiles."+chain[len(chain)-1]+".extends",
				fmt.Errorf("extends cycle: %s", strings.Join(append(chain, name), " → ")))
		}
		pr, ok := doc.Profiles[name]
		if !ok {
			return nil, false, bad("profiles."+chain[len(chain)-1]+".extends", fmt.Errorf("no profile %q in this file", name))
		}
		chain = append(chain, name)
		name = pr.Extends
	}
	for _, name := range slices.Backward(chain) {
		pr := doc.Profiles[name]
		layers = append(layers, layer{settings: &pr.Settings, file: file, profile: name, lines: lines})
	}
	return layers, true, nil
}

// decodeError turns the TOML library's error into an *Error.
func decodeError(file string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		e := strict.Errors[0]
		row, _ := e.Position()
		return &Error{File: file, Line: row, Key: strings.Join(e.Key(), "."), Err: errors.New("unknown key")}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if want := kindOf(de.Key()); want != "" && strings.HasPrefix(msg, "cannot decode") {
			msg = "wrong type: want " + want
		}
		return &Error{File: file, Line: row, Key: key, Err: errors.New(msg)}
	}
	return fmt.Errorf("%s: %w", file, err)
}

// kindOf names the TOML type a key's value must have ("" when unknown).
func kindOf(key []string) string {
	if len(key) == 0 {
		return ""
	}
	last := key[len(key)-1]
	if last == "extends" {
		return "a string"
	}
	if last == "profiles" || (len(key) == 2 && key[0] == "profiles") {
		return "a table"
	}
	var s Settings
	f := s.field(last)
	if !f.IsValid() {
		return ""
	}
	t := f.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		return "an array of strings"
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	default:
		return "a string"
	}
}

// keyLines maps each key-value's full dotted key to its line.
func keyLines(data []byte) map[string]int {
	lines := map[string]int{}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		var parts []string
		it := e.Key()
		line := 0
		for it.Next() {
			n := it.Node()
			parts = append(parts, string(n.Data))
			if line == 0 {
				line = p.Shape(p.Range(n.Data)).Start.Line
			}
		}
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = parts
		case unstable.KeyValue:
			lines[strings.Join(append(slices.Clone(table), parts...), ".")] = line
		}
	}
	return lines
}

// check validates s (the settings at prefix of a file) and makes its paths
// absolute: "~/" expands to home; a relative path is relative to dir (a
// project file's directory), and refused in the user's file (dir "").
func check(s *Settings, prefix, dir, home string, bad func(string, error) error) error {
	at := func(k string) string { return prefix + k }
	if s.Mode != "" {
		if _, err := modes.Parse(s.Mode); err != nil {
			return bad(at("mode"), err)
		}
	}
	if dir != "" && s.Workspace != "" {
		return bad(at("workspace"), errors.New("a project file cannot move the workspace"))
	}
	abs := func(key string, p *string, mustBeDir bool) error {
		v := *p
		switch {
		case strings.HasPrefix(v, "~/") && home == "":
			return bad(at(key), fmt.Errorf("%q: no home to expand ~/ in", v))
		case strings.HasPrefix(v, "~/"):
			v = filepath.Join(home, v[2:])
		case filepath.IsAbs(v):
		case dir != "":
			v = filepath.Join(dir, v)
		default:
			return bad(at(key), fmt.Errorf("%q: must be absolute or start with ~/", v))
		}
		if mustBeDir {
			if fi, err := os.Stat(v); err != nil {
				return bad(at(key), err)
			} else if !fi.IsDir() {
				return bad(at(key), fmt.Errorf("%s: not a directory", v))
			}
		}
		*p = filepath.Clean(v)
		return nil
	}
	for _, d := range []struct {
		key  string
		p    *string
		must bool
	}{{"workspace", &s.Workspace, true}, {"cache_dir", &s.CacheDir, false}} {
		if *d.p != "" {
			if err := abs(d.key, d.p, d.must); err != nil {
				return err
			}
		}
	}
	for _, d := range []struct {
		key  string
		list []string
		must bool
	}{{"allow_write", s.AllowWrite, true}, {"deny_read", s.DenyRead, false}, {"allow_read", s.AllowRead, false}} {
		for i := range d.list {
			if err := abs(d.key, &d.list[i], d.must); err != nil {
				return err
			}
		}
	}
	for _, h := range s.AllowHost {
		if _, err := modes.ParseHost(h); err != nil {
			return bad(at("allow_host"), err)
		}
	}
	for _, r := range s.Resolve {
		if _, _, err := modes.ParseResolve(r); err != nil {
			return bad(at("resolve"), err)
		}
	}
	if s.MaxMemory != "" {
		if _, err := modes.ParseSize(s.MaxMemory); err != nil {
			return bad(at("max_memory"), err)
		}
	}
	if s.MaxPids != nil && *s.MaxPids < 0 {
		return bad(at("max_pids"), fmt.Errorf("%d: must be 0 (unlimited) or more", *s.MaxPids))
	}
	if s.MaxCPU != nil && *s.MaxCPU < 0 {
		return bad(at("max_cpu"), fmt.Errorf("%g: must be 0 (unlimited) or more", *s.MaxCPU))
	}
	for _, name := range s.Preset {
		if !slices.Contains(Presets(), name) {
			return bad(at("preset"), fmt.Errorf("%q: not one of %s", name, strings.Join(Presets(), ", ")))
		}
	}
	for _, e := range s.Protect {
		if e == "" {
			return bad(at("protect"), errors.New("empty path"))
		}
	}
	return nil
}
