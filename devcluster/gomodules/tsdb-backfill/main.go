// tsdb-backfill writes a DCGM history that devcluster/backfill.py describes straight into
// Prometheus TSDB blocks, one block per window, with Prometheus's own block writer.
//
// `promtool tsdb create-blocks-from openmetrics` needs the history as text first and parses it
// again: days for the 860 million samples of 5,000 GPUs over 30 days. Here Python describes the
// history once (each GPU's labels, each metric's value at every utilisation, each GPU's
// utilisation every hour) and this program only multiplies it out, so every value still comes
// from Python's model.
//
// Usage: tsdb-backfill SPEC.json OUTPUT_DIR
//
// SPEC.json:
//
//	{"start_ms": first sample, "step_ms": between samples, "samples": per series,
//	 "window_ms": a block's span, "first_hour": the hour (unix seconds / 3600) of the first
//	 sample, "hours": columns of the utilisation file,
//	 "utilisation_file": one byte (0..100) per GPU and hour, GPU after GPU,
//	 "gpus": [{label: value, ...}, ...], "metrics": [{"name": ..., "values": [101 numbers]}]}
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

type metric struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
}

type spec struct {
	StartMs         int64               `json:"start_ms"`
	StepMs          int64               `json:"step_ms"`
	Samples         int64               `json:"samples"`
	WindowMs        int64               `json:"window_ms"`
	FirstHour       int64               `json:"first_hour"`
	Hours           int64               `json:"hours"`
	UtilisationFile string              `json:"utilisation_file"`
	Gpus            []map[string]string `json:"gpus"`
	Metrics         []metric            `json:"metrics"`
}

type history struct {
	spec
	utilisation []byte
	series      [][]labels.Labels // [metric][gpu]
}

func load(path string) (*history, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h history
	if err := json.Unmarshal(raw, &h.spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if h.StepMs <= 0 || h.Samples <= 0 || h.WindowMs < h.StepMs || len(h.Gpus) == 0 {
		return nil, fmt.Errorf("%s: needs step_ms > 0, samples > 0, window_ms >= step_ms, gpus", path)
	}
	if h.utilisation, err = os.ReadFile(h.UtilisationFile); err != nil {
		return nil, err
	}
	if int64(len(h.utilisation)) != int64(len(h.Gpus))*h.Hours {
		return nil, fmt.Errorf("%s: %d bytes, want %d GPUs x %d hours",
			h.UtilisationFile, len(h.utilisation), len(h.Gpus), h.Hours)
	}
	for _, m := range h.Metrics {
		if len(m.Values) != 101 {
			return nil, fmt.Errorf("%s: metric %s has %d values, want 101", path, m.Name, len(m.Values))
		}
		perGpu := make([]labels.Labels, len(h.Gpus))
		for i, gpu := range h.Gpus {
			builder := labels.NewScratchBuilder(len(gpu) + 1)
			builder.Add(labels.MetricName, m.Name)
			for name, value := range gpu {
				builder.Add(name, value)
			}
			builder.Sort()
			perGpu[i] = builder.Labels()
		}
		h.series = append(h.series, perGpu)
	}
	return &h, nil
}

func (h *history) value(metricIndex, gpu int, t int64) (float64, error) {
	hour := t/3_600_000 - h.FirstHour
	if hour < 0 || hour >= h.Hours {
		return 0, fmt.Errorf("sample at %d ms is outside the utilisation file's hours", t)
	}
	level := h.utilisation[int64(gpu)*h.Hours+hour]
	if level > 100 {
		return 0, fmt.Errorf("GPU %d's utilisation in hour %d is %d, over 100", gpu, hour, level)
	}
	return h.Metrics[metricIndex].Values[level], nil
}

// writeWindow writes every series' samples in [from, to) as one block in outputDir.
func (h *history) writeWindow(ctx context.Context, logger *slog.Logger, outputDir string, from, to int64) error {
	// The head accepts a sample no older than half its chunk range before its newest one, and
	// series are written one after another across the whole window: twice the window fits.
	writer, err := tsdb.NewBlockWriter(logger, outputDir, 2*h.WindowMs)
	if err != nil {
		return err
	}
	defer writer.Close()
	for metricIndex, perGpu := range h.series {
		for gpu, series := range perGpu {
			appender := writer.Appender(ctx)
			var ref storage.SeriesRef
			for t := from; t < to; t += h.StepMs {
				value, err := h.value(metricIndex, gpu, t)
				if err != nil {
					return err
				}
				if ref, err = appender.Append(ref, series, t, value); err != nil {
					_ = appender.Rollback()
					return fmt.Errorf("append %s at %d: %w", series, t, err)
				}
			}
			if err := appender.Commit(); err != nil {
				return err
			}
		}
	}
	_, err = writer.Flush(ctx)
	return err
}

// windows splits the samples into spans of whole steps no longer than window_ms.
func (h *history) windows() [][2]int64 {
	end := h.StartMs + h.Samples*h.StepMs
	stepsPerWindow := h.WindowMs / h.StepMs
	var spans [][2]int64
	for from := h.StartMs; from < end; from += stepsPerWindow * h.StepMs {
		spans = append(spans, [2]int64{from, min(from+stepsPerWindow*h.StepMs, end)})
	}
	return spans
}

func run(specPath, outputDir string) error {
	h, err := load(specPath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outputDir, 0o755); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	spans := h.windows()
	errs := make([]error, len(spans))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, span := range spans {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			errs[i] = h.writeWindow(context.Background(), logger, outputDir, span[0], span[1])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("window from %d ms: %w", spans[i][0], err)
		}
	}
	fmt.Printf("%d blocks, %d series, %d samples each\n",
		len(spans), len(h.Gpus)*len(h.Metrics), h.Samples)
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tsdb-backfill SPEC.json OUTPUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "tsdb-backfill:", err)
		os.Exit(1)
	}
}
