package testtime

import (
	"os"
	"strconv"
	"time"
)

// EnvVar holds the factor: a positive number, 1 when unset or invalid.
const EnvVar = "DSH_TEST_TIME_SCALE"

// Factor is the scale factor from the environment (at least 1).
func Factor() float64 {
	f, err := strconv.ParseFloat(os.Getenv(EnvVar), 64)
	if err != nil || f < 1 {
		return 1
	}
	return f
}

// Scale multiplies d by Factor.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Factor())
}

// Ms multiplies a duration in milliseconds by Factor.
func Ms(ms float64) float64 { return ms * Factor() }
