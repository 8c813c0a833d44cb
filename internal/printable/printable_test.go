package printable

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain/path.go", "plain/path.go"},
		{"héllo wörld", "héllo wörld"},
		{`back\slash`, `back\slash`},
		{"a\nb", `a\nb`},
		{"tab\there", `tab\there`},
		{"\x1b[1A\x1b[2Kgone", `\x1b[1A\x1b[2Kgone`},
		{"cr\rover", `cr\rover`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"iso\u2066late\u2069", `iso\u2066late\u2069`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"esc\x1b and \\ back", `esc\x1b and \\ back`},
		{`"quoted" 'it'` + "\x07", `"quoted" 'it'\a`},
	} {
		if got := Name(c.in); got != c.want {
			t.Errorf("Name(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"line one\n\tindented\n", "line one\n\tindented\n"},
		{"hide\x1b[2K\rline\n", `hide\x1b[2K\rline` + "\n"},
		{"a\u2028b", `a\u2028b`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"path": "a\u202eb\u009bc\x7fd\x1be\nf\\g"}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(b)
	for _, r := range string(got) {
		if hidden(r) {
			t.Fatalf("JSON left %U raw in %q", r, got)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["path"] != v["path"] {
		t.Errorf("JSON(%s) = %s decodes to %q (%v), want %q", b, got, back["path"], err, v["path"])
	}
	indented := []byte("{\n\t\"ok\": \"x\"\n}")
	if got := JSON(indented); string(got) != string(indented) {
		t.Errorf("JSON changed %q to %q", indented, got)
	}
}

// A name built to fake a diff header stays on its line.
func ExampleName() {
	fmt.Println("New file " + Name("ok.txt\n+++ b/innocent.txt"))
	// Output: New file ok.txt\n+++ b/innocent.txt
}
