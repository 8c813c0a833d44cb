package tool

import (
	"context"

	"github.com/dsh-sandbox/dsh-sandbox/call"
	"github.com/dsh-sandbox/dsh-sandbox/envreg"
)

// RegistryEnv collects each call's managed DSH_* variables from r: a fresh
// snapshot per call (foreground or background), passed to the executor as
// Request.DshEnv.
func RegistryEnv(r *envreg.Registry) EnvFunc {
	return func(ctx context.Context, c call.Context, background bool) (map[string]string, error) {
		snap, err := r.Collect(ctx, envreg.Execution{Agent: c.Agent, CallID: c.ID, Background: background})
		if err != nil {
			return nil, err
		}
		return snap.Map(), nil
	}
}
