package tasks

import (
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/mempo/mempo/lib/fileio"
)

// Write writes tasks atomically to path, as Parquet or JSONL by extension.
func Write(path string, ts []Task) error {
	format, err := fileio.Format(path)
	if err != nil {
		return err
	}
	out, err := fileio.Create(path)
	if err != nil {
		return err
	}
	defer out.Abort()
	switch format {
	case "parquet":
		w := parquet.NewGenericWriter[Task](out, parquet.Compression(&parquet.Zstd))
		if _, err := w.Write(ts); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	default:
		jw := fileio.NewJSONLWriter(out)
		for i := range ts {
			if err := jw.Write(&ts[i]); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		if err := jw.Flush(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return out.Commit()
}

// ReadTasks reads a tasks file (this package's Parquet or JSONL, or any QA
// layout ReadFile accepts, made into k = 1 tasks).
func ReadTasks(path string) ([]Task, error) {
	qs, direct, err := ReadFile(path, "auto", "")
	if err != nil {
		return nil, err
	}
	single, err := Build(qs, 1)
	if err != nil {
		return nil, err
	}
	return append(direct, single...), nil
}
