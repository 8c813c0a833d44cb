package testtime

import (
	"testing"
	"time"
)

func TestScale(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{
		{"", time.Second},
		{"10", 10 * time.Second},
		{"2.5", 2500 * time.Millisecond},
		{"0.5", time.Second}, // never shrinks
		{"-3", time.Second},
		{"fast", time.Second},
	} {
		t.Setenv(EnvVar, c.env)
		if got := Scale(time.Second); got != c.want {
			t.Errorf("%s=%q: Scale(1s) = %v, want %v", EnvVar, c.env, got, c.want)
		}
		if got, want := Ms(1000), float64(c.want/time.Millisecond); got != want {
			t.Errorf("%s=%q: Ms(1000) = %v, want %v", EnvVar, c.env, got, want)
		}
	}
}
