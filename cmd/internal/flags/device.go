package flags

import (
	"fmt"
	"slices"

	ucli "github.com/urfave/cli/v2"
)

// Devices is the one --device vocabulary of every command. The model
// commands pass it to model.NewBackend; mempo-index and mempo-serve run
// their encoder on it (cuda-bf16 is refused there: the encoder's GPU
// number formats are chosen by --encoder-precision).
var Devices = []string{"cpu", "cuda", "cuda-bf16", "auto"}

// DeviceUsage describes the vocabulary for --help.
const DeviceUsage = "cpu, cuda, cuda-bf16 (bf16 products and tensor-core attention) or auto (cuda when usable, else cpu)"

// Device is the --device flag; extra, when not empty, is added to its usage.
// A value outside Devices is refused when the flags are parsed.
func Device(extra string) *ucli.StringFlag {
	usage := DeviceUsage
	if extra != "" {
		usage += "; " + extra
	}
	return &ucli.StringFlag{Name: "device", Value: "auto", Usage: usage,
		Action: func(_ *ucli.Context, v string) error { return CheckDevice(v) }}
}

// CheckDevice says whether d is in the --device vocabulary.
func CheckDevice(d string) error {
	if !slices.Contains(Devices, d) {
		return fmt.Errorf("--device %q: want cpu, cuda, cuda-bf16 or auto", d)
	}
	return nil
}
