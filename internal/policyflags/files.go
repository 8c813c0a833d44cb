package policyflags

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/pflag"

	"github.com/dsh-sandbox/dsh-sandbox/policyfile"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// AddFileFlags registers --profile, --config and --no-config on
// fs, in this order.
func (p *Policy) AddFileFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.Profile, "profile", "", "apply the policy files' profile `NAME` ([profiles.NAME]) over their top level")
	fs.StringVar(&p.Config, "config", "", "read the user's policy from `FILE` (default: $XDG_CONFIG_HOME/dsh-sandbox/config.toml)")
	fs.BoolVar(&p.NoConfig, "no-config", false, "read no policy file: the flags alone make the policy")
	fs.StringArrayVar(&p.Preset, "preset", nil, "allow the registries `TOOL` (go, node, python, rust, java) is configured to use, read from its own configuration (confined modes; repeatable)")
}

// Files is what LoadFiles read: the files' policy with the flags' origins
// added, and the directories the files live in.
type Files struct {
	*policyfile.Policy
	// ConfigDir and StateDir are the user's dsh-sandbox directories
	// (policyfile.Dirs).
	ConfigDir, StateDir string
}

// Dirs are ConfigDir and StateDir, those that are known.
func (f *Files) Dirs() []string {
	var dirs []string
	for _, d := range []string{f.ConfigDir, f.StateDir} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// LoadFiles reads the user's policy file and the workspace's trusted
// project file (policyfile.Load; none with --no-config) and applies them
// under the flags fs parsed: a scalar flag given replaces the files'
// setting, a list flag adds its entries after the files'. Call it after
// parsing and before CheckLimits. A file's bad input is a
// *policyfile.Error.
func (p *Policy) LoadFiles(fs *pflag.FlagSet, getenv func(string) string) (*Files, error) {
	cfgDir, stateDir := policyfile.Dirs(getenv)
	f := &Files{Policy: &policyfile.Policy{Origins: map[string][]policyfile.Origin{}}, ConfigDir: cfgDir, StateDir: stateDir}
	if p.NoConfig {
		if p.Config != "" || p.Profile != "" {
			return nil, errors.New("usage error: --no-config reads no file: --config and --profile need one")
		}
	} else {
		o := policyfile.Options{UserFile: p.Config, TrustDir: stateDir, Profile: p.Profile, Home: getenv("HOME")}
		if o.UserFile == "" && cfgDir != "" {
			o.UserFile = filepath.Join(cfgDir, "config.toml")
			// The directory stays read-only in every sandbox, not what a
			// symlink in it points to: a confined command could change that.
			if fi, err := os.Lstat(o.UserFile); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				return nil, fmt.Errorf("%s is a symlink: a confined command could change what it points to; make it the file itself, or give --config FILE", o.UserFile)
			}
		} else if o.UserFile != "" {
			if _, err := os.Stat(o.UserFile); err != nil {
				return nil, fmt.Errorf("usage error: --config: %w", err)
			}
		}
		// The project file is the workspace's: the flag's, else the user
		// file's, else the current directory.
		ws := p.Workspace
		if ws == "" {
			user, err := policyfile.Load(policyfile.Options{UserFile: o.UserFile, Home: o.Home})
			if err != nil {
				return nil, err
			}
			ws = user.Workspace
		}
		if ws == "" {
			ws, _ = os.Getwd()
		}
		o.ProjectDir = ws
		loaded, err := policyfile.Load(o)
		if err != nil {
			return nil, err
		}
		f.Policy = loaded
	}
	p.applyFile(fs, f.Policy)
	return f, nil
}

// applyFile sets what the files set and fs's flags do not, and records
// the flags' origins in fp.
func (p *Policy) applyFile(fs *pflag.FlagSet, fp *policyfile.Policy) {
	s := &fp.Settings
	scalar := func(flag string, set bool, apply func()) {
		switch {
		case fs.Changed(flag):
			fp.Origins[flagKey(flag)] = []policyfile.Origin{{Flag: true}}
		case set:
			apply()
		}
	}
	// fromFiles are the list flags' entries the files put first.
	fromFiles := map[string]int{}
	lists := map[string]*[]string{}
	list := func(flag string, dst *[]string, file []string) {
		if fs.Changed(flag) {
			fp.Origins[flagKey(flag)] = append(fp.Origins[flagKey(flag)], policyfile.Origin{Flag: true})
		}
		*dst = append(append([]string(nil), file...), *dst...)
		fromFiles[flag], lists[flag] = len(file), dst
	}
	scalar("mode", s.Mode != "", func() { p.Mode = s.Mode })
	scalar("workspace", s.Workspace != "", func() { p.Workspace = s.Workspace })
	list("allow-write", &p.AllowWrite, s.AllowWrite)
	list("protect", &p.Protect, s.Protect)
	list("unprotect", &p.Unprotect, s.Unprotect)
	list("deny-read", &p.DenyRead, s.DenyRead)
	list("allow-read", &p.AllowRead, s.AllowRead)
	scalar("network", s.Network != nil, func() { p.Network = *s.Network })
	list("allow-domain", &p.AllowDomain, s.AllowDomain)
	list("deny-domain", &p.DenyDomain, s.DenyDomain)
	list("allow-host", &p.AllowHost, s.AllowHost)
	list("resolve", &p.Resolve, s.Resolve)
	list("preset", &p.Preset, s.Preset)
	scalar("allow-broad-workspace", s.AllowBroadWorkspace != nil, func() { p.AllowBroadWorkspace = *s.AllowBroadWorkspace })
	scalar("no-caches", s.NoCaches != nil, func() { p.NoCaches = *s.NoCaches })
	scalar("cache-dir", s.CacheDir != "", func() { p.CacheDir = s.CacheDir })
	// What a file sets for another mode than the one in effect does not
	// apply: its writable roots under read-only, its deny-read set and
	// allowlist under danger-full-access or --network. (The same given as
	// flags is a usage error.)
	var drop []string
	mode, err := modes.Parse(p.Mode)
	if err == nil && mode != modes.WorkspaceWrite {
		drop = append(drop, "allow-write", "protect", "unprotect")
	}
	if err == nil && !mode.Confines() {
		drop = append(drop, "deny-read", "allow-read")
	}
	if (err == nil && !mode.Confines()) || p.Network {
		drop = append(drop, "allow-domain", "deny-domain", "allow-host", "resolve", "preset")
	}
	for _, flag := range drop {
		if n := fromFiles[flag]; n > 0 {
			*lists[flag] = (*lists[flag])[n:]
			delete(fp.Origins, flagKey(flag))
			if fs.Changed(flag) {
				fp.Origins[flagKey(flag)] = []policyfile.Origin{{Flag: true}}
			}
		}
	}
	p.fromFile = map[string]bool{}
	if fs.Lookup("max-pids") == nil {
		return
	}
	scalar("max-pids", s.MaxPids != nil, func() { p.maxPids, p.fromFile["max-pids"] = *s.MaxPids, true })
	scalar("max-memory", s.MaxMemory != "", func() { p.maxMemory, p.fromFile["max-memory"] = s.MaxMemory, true })
	scalar("max-cpu", s.MaxCPU != nil, func() { p.maxCPU, p.fromFile["max-cpu"] = *s.MaxCPU, true })
}

func flagKey(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Effective is the policy the files and flags make, as settings.
func (p *Policy) Effective(fs *pflag.FlagSet) policyfile.Settings {
	s := policyfile.Settings{
		Mode: p.Mode, Workspace: p.Workspace, AllowWrite: p.AllowWrite, Protect: p.Protect,
		Unprotect: p.Unprotect, DenyRead: p.DenyRead, AllowRead: p.AllowRead,
		AllowDomain: p.AllowDomain, DenyDomain: p.DenyDomain, AllowHost: p.AllowHost,
		Resolve: p.Resolve, CacheDir: p.CacheDir, Preset: p.Preset,
	}
	b := func(v bool) *bool {
		if !v {
			return nil
		}
		return &v
	}
	s.Network, s.AllowBroadWorkspace, s.NoCaches = b(p.Network), b(p.AllowBroadWorkspace), b(p.NoCaches)
	if fs.Changed("max-pids") || p.fromFile["max-pids"] {
		n := p.Limits.MaxPids
		s.MaxPids = &n
	}
	if fs.Changed("max-memory") || p.fromFile["max-memory"] {
		s.MaxMemory = p.maxMemory
	}
	if fs.Changed("max-cpu") || p.fromFile["max-cpu"] {
		c := p.Limits.MaxCPU
		s.MaxCPU = &c
	}
	return s
}

// ApplyPresets resolves the presets (policyfile.ResolvePresets, with
// environ) and adds their domains to AllowDomain, each with its origin in
// f. It returns what each resolved to, or nil without presets.
func (p *Policy) ApplyPresets(environ []string, f *Files) []policyfile.Preset {
	if len(p.Preset) == 0 {
		return nil
	}
	presets := policyfile.ResolvePresets(p.Preset, environ)
	for _, pr := range presets {
		added := false
		for _, d := range pr.Domains {
			if !slices.Contains(p.AllowDomain, d) {
				p.AllowDomain, added = append(p.AllowDomain, d), true
			}
		}
		if added {
			f.Origins["allow_domain"] = append(f.Origins["allow_domain"], policyfile.Origin{Preset: pr.Name})
		}
	}
	return presets
}
