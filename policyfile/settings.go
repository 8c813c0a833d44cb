package policyfile

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// Settings are what a policy file can set. Each field is a policy flag's
// value under the flag's TOML name (the flag's name, "-" as "_"); an unset
// scalar is its zero value or nil, an unset list is empty.
type Settings struct {
	Mode                string   `toml:"mode" json:"mode,omitempty"`
	Workspace           string   `toml:"workspace" json:"workspace,omitempty"`
	AllowWrite          []string `toml:"allow_write" json:"allowWrite,omitempty"`
	Protect             []string `toml:"protect" json:"protect,omitempty"`
	Unprotect           []string `toml:"unprotect" json:"unprotect,omitempty"`
	DenyRead            []string `toml:"deny_read" json:"denyRead,omitempty"`
	AllowRead           []string `toml:"allow_read" json:"allowRead,omitempty"`
	Network             *bool    `toml:"network" json:"network,omitempty"`
	AllowDomain         []string `toml:"allow_domain" json:"allowDomain,omitempty"`
	DenyDomain          []string `toml:"deny_domain" json:"denyDomain,omitempty"`
	AllowHost           []string `toml:"allow_host" json:"allowHost,omitempty"`
	Resolve             []string `toml:"resolve" json:"resolve,omitempty"`
	AllowBroadWorkspace *bool    `toml:"allow_broad_workspace" json:"allowBroadWorkspace,omitempty"`
	NoCaches            *bool    `toml:"no_caches" json:"noCaches,omitempty"`
	CacheDir            string   `toml:"cache_dir" json:"cacheDir,omitempty"`
	MaxPids             *int     `toml:"max_pids" json:"maxPids,omitempty"`
	MaxMemory           string   `toml:"max_memory" json:"maxMemory,omitempty"`
	MaxCPU              *float64 `toml:"max_cpu" json:"maxCpu,omitempty"`
	// Preset names toolchains (Presets) whose configured registries are
	// allowed, as ResolvePresets reads them.
	Preset []string `toml:"preset" json:"preset,omitempty"`
}

// Keys returns the TOML names of every setting, in the order of Settings.
func Keys() []string {
	t := reflect.TypeFor[Settings]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("toml")
	}
	return keys
}

// Flag is the command-line flag of the setting key ("allow_write":
// "allow-write").
func Flag(key string) string { return strings.ReplaceAll(key, "_", "-") }

// field returns the field of s named by key (a Keys entry).
func (s *Settings) field(key string) reflect.Value {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("toml") == key {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// IsSet reports whether s sets key.
func (s *Settings) IsSet(key string) bool {
	f := s.field(key)
	return f.IsValid() && !f.IsZero() && (f.Kind() != reflect.Slice || f.Len() > 0)
}

// Value is key's value in s, as TOML would show it: a string, a []string,
// a bool, an int or a float64; nil when unset.
func (s *Settings) Value(key string) any {
	if !s.IsSet(key) {
		return nil
	}
	f := s.field(key)
	if f.Kind() == reflect.Pointer {
		return f.Elem().Interface()
	}
	return f.Interface()
}

// merge applies over onto s: a scalar over sets replaces s's, a list is
// appended to s's (an entry s already has is not added twice). It returns
// the keys over sets.
func (s *Settings) merge(over *Settings) []string {
	var set []string
	for _, k := range Keys() {
		if !over.IsSet(k) {
			continue
		}
		set = append(set, k)
		dst, src := s.field(k), over.field(k)
		if src.Kind() != reflect.Slice {
			dst.Set(src)
			continue
		}
		for i := range src.Len() {
			e := src.Index(i)
			if !slices.Contains(dst.Interface().([]string), e.String()) {
				dst.Set(reflect.Append(dst, e))
			}
		}
	}
	return set
}

// String renders a setting's value for a person.
func String(v any) string {
	switch v := v.(type) {
	case []string:
		return strings.Join(v, " ")
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Config is the executor configuration s sets: its mode, workspace,
// writable roots, protected paths, deny-read set, network and allowlist,
// limits and caches. What s
// leaves unset keeps executor.Config's zero value.
func (s *Settings) Config() (executor.Config, error) {
	var c executor.Config
	if s.Mode != "" {
		m, err := modes.Parse(s.Mode)
		if err != nil {
			return c, err
		}
		c.Mode = m
	}
	c.Workspace, c.CacheDir = s.Workspace, s.CacheDir
	c.AllowWrite, c.Protect, c.Unprotect = s.AllowWrite, s.Protect, s.Unprotect
	c.DenyRead, c.AllowRead = s.DenyRead, s.AllowRead
	c.Network = s.Network != nil && *s.Network
	c.AllowBroadWorkspace = s.AllowBroadWorkspace != nil && *s.AllowBroadWorkspace
	c.NoCaches = s.NoCaches != nil && *s.NoCaches
	al, err := modes.NewAllowlist(s.AllowDomain, s.DenyDomain, s.AllowHost, s.Resolve)
	if err != nil {
		return c, err
	}
	c.Allowlist = al
	if s.MaxPids != nil || s.MaxMemory != "" || s.MaxCPU != nil {
		l, err := s.Limits(modes.DefaultLimits())
		if err != nil {
			return c, err
		}
		c.Limits = &l
	}
	return c, nil
}

// Limits is base with each limit s sets replacing base's.
func (s *Settings) Limits(base modes.Limits) (modes.Limits, error) {
	if s.MaxPids != nil {
		base.MaxPids = *s.MaxPids
	}
	if s.MaxMemory != "" {
		n, err := modes.ParseSize(s.MaxMemory)
		if err != nil {
			return base, err
		}
		base.MaxMemory = n
	}
	if s.MaxCPU != nil {
		base.MaxCPU = *s.MaxCPU
	}
	return base, base.Validate()
}
