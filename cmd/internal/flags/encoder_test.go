package flags

import (
	"path/filepath"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/lib/cuda"
	"github.com/mempo/mempo/lib/encoder"
)

const encFixture = "../../../testdata/encoder"

// The encoder's device flags: bad values are one-line errors naming the
// flag; auto without a usable GPU runs on the CPU and says why on the
// encoder's log line.
func TestEncoderDeviceFlags(t *testing.T) {
	model := filepath.Join(encFixture, "model")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--encoder", model, "--device", "tpu"}, `--device "tpu": want cpu, cuda, cuda-bf16 or auto`},
		{[]string{"--encoder", model, "--device", "cuda-bf16"}, "--device cuda-bf16: the encoder has no bf16 mode"},
		{[]string{"--encoder", model, "--encoder-precision", "bf16"}, `--encoder-precision "bf16": want fp16 or fp32`},
		{[]string{"--encoder", model, "--device", "cpu", "--encoder-precision", "fp16"}, "--encoder-precision fp16 needs a GPU"},
		{[]string{"--device", "cuda"}, "--device needs --encoder"},
		{[]string{"--encoder", model, "--encode-batch", "-1"}, "--encode-batch not negative"},
	} {
		app := &ucli.App{Name: "mempo-x", Flags: EncoderFlags(), Action: func(c *ucli.Context) error {
			_, err := LoadEncoder(c)
			return err
		}}
		err := app.Run(append([]string{"mempo-x"}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
	e, err := encoder.Load(model, encoder.Options{Device: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	line := DescribeEncoder(e, model)
	if ok, why := cuda.Available(); ok {
		if !strings.Contains(line, "device cuda (") || !strings.HasSuffix(line, "fp16)") {
			t.Errorf("auto with CUDA: %s", line)
		}
	} else if !strings.HasSuffix(line, "device cpu (fp32; CUDA not usable: "+why+")") {
		t.Errorf("auto without CUDA: %s", line)
	}
	t.Log(line)
}
