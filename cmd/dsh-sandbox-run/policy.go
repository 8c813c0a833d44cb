package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dsh-sandbox/dsh-sandbox/internal/policyflags"
	"github.com/dsh-sandbox/dsh-sandbox/policyfile"
)

// policyDoc is what `policy --json` prints: the files applied, the
// profile, why a project file was not, and each setting with where it
// came from.
type policyDoc struct {
	Files     []string            `json:"files"`
	Profile   string              `json:"profile,omitempty"`
	Untrusted string              `json:"untrusted,omitempty"`
	Settings  []policySetting     `json:"settings"`
	Presets   []policyfile.Preset `json:"presets,omitempty"`
}

type policySetting struct {
	Key   string              `json:"key"`
	Value any                 `json:"value"`
	From  []policyfile.Origin `json:"from"`
}

// printPolicy prints the effective policy the files and flags of o make,
// and where each setting came from: `dsh-sandbox-run policy`.
func printPolicy(o options, stdout, stderr io.Writer) int {
	eff := o.Effective(o.flags)
	doc := policyDoc{Files: o.files.Files, Profile: o.Profile, Untrusted: o.files.Untrusted, Settings: []policySetting{}, Presets: o.presets}
	if doc.Files == nil {
		doc.Files = []string{}
	}
	for _, k := range policyfile.Keys() {
		v := eff.Value(k)
		from := o.files.Origins[k]
		if v == nil {
			continue
		}
		if len(from) == 0 {
			from = []policyfile.Origin{}
		}
		doc.Settings = append(doc.Settings, policySetting{Key: k, Value: v, From: from})
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return failer(stderr, name, exitSetup)("%v", err)
		}
		return 0
	}
	files := "none"
	if len(doc.Files) > 0 {
		files = strings.Join(doc.Files, ", ")
	}
	fmt.Fprintf(stdout, "files: %s\n", files)
	if doc.Profile != "" {
		fmt.Fprintf(stdout, "profile: %s\n", doc.Profile)
	}
	if doc.Untrusted != "" {
		fmt.Fprintf(stdout, "not applied: %s\n", doc.Untrusted)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, st := range doc.Settings {
		from := make([]string, len(st.From))
		for i, f := range st.From {
			from[i] = f.String()
		}
		if len(from) == 0 {
			from = []string{"default"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", st.Key, policyfile.String(st.Value), strings.Join(from, ", "))
	}
	tw.Flush()
	for _, p := range doc.Presets {
		fmt.Fprintf(stdout, "preset %s: %s (from %s)", p.Name, strings.Join(p.Domains, " "), p.From)
		if p.Note != "" {
			fmt.Fprintf(stdout, "; %s", p.Note)
		}
		fmt.Fprintln(stdout)
	}
	return 0
}

// trustCommand runs `trust [--workspace DIR] [--revoke]`: record that the
// workspace's .dsh-sandbox.toml, as it is now, applies to the commands
// run there (or stop it applying).
func trustCommand(argv []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fail := failer(stderr, name, exitSetup)
	fs := policyflags.NewFlagSet(name + " trust")
	ws := fs.String("workspace", "", "")
	revoke := fs.Bool("revoke", false, "")
	if err := fs.Parse(argv); err != nil {
		return fail("usage error: %v (%s trust [--workspace DIR] [--revoke])", err, name)
	}
	if fs.NArg() > 0 {
		return fail("usage error: unexpected argument %q (%s trust [--workspace DIR] [--revoke])", fs.Arg(0), name)
	}
	dir := *ws
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return fail("trust: %v", err)
		}
	}
	_, state := policyfile.Dirs(getenv)
	if *revoke {
		path, err := policyfile.Revoke(state, dir)
		if err != nil {
			return fail("trust --revoke: %v", err)
		}
		fmt.Fprintf(stdout, "%s no longer applies\n", path)
		return 0
	}
	path, sum, err := policyfile.Trust(state, dir, getenv("HOME"))
	if err != nil {
		if path != "" && !strings.HasPrefix(err.Error(), path) {
			return fail("trust: %s: %v", path, err)
		}
		return fail("trust: %v", err)
	}
	fmt.Fprintf(stdout, "trusted %s (%s): it applies until it changes\n", path, sum)
	return 0
}
