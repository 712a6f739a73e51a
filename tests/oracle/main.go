// Command oracle runs one KAI scheduling session on a cluster snapshot with KAI's own
// code and prints each pod's outcome as `kai-ray schedule -o json` prints it.
//
//	oracle --snapshot FILE [--config FILE] [--actions LIST] [--now RFC3339] [--write-zip OUT]
//	oracle --batch < cases.jsonl > results.jsonl
//
// FILE is a Kubernetes List or multi-document stream (what `kai-ray schedule --snapshot`
// reads) or a ZIP from KAI's /get-snapshot endpoint (which carries its own config).
// --write-zip writes the ZIP KAI's snapshot plugin serves for this cluster and config.
// In batch mode each input line is {"id", "snapshot" or "file", "config", "actions",
// "now", "writeZip", "fixes"} and each output line {"id", "result"} or {"id", "error"}; one process
// serves many sessions, so KAI's start-up is paid once.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/log"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/plugins"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/plugins/snapshot"
)

// request is one session to run: the cluster, kai-ray's config and the CLI's overrides.
type request struct {
	ID       string          `json:"id"`
	Snapshot json.RawMessage `json:"snapshot"` // a List object, or YAML/JSON text as a string
	File     string          `json:"file"`     // or a file: a List/stream or a /get-snapshot ZIP
	Config   json.RawMessage `json:"config"`   // kai-ray's config mapping
	Actions  string          `json:"actions"`  // "" = the config's; "none"
	Now      string          `json:"now"`      // RFC 3339; "" = the wall clock
	WriteZip string          `json:"writeZip"` // where to write the /get-snapshot ZIP
	Fixes    []string        `json:"fixes"`    // fixes to KAI to turn on (the kaifixes build only)
}

type response struct {
	ID     string   `json:"id"`
	Result *outcome `json:"result,omitempty"`
	Error  string   `json:"error,omitempty"`
}

func main() {
	flags := flag.NewFlagSet("oracle", flag.ContinueOnError)
	snapshotPath := flags.String("snapshot", "", "cluster: Kubernetes List/stream (YAML or JSON) or a /get-snapshot ZIP")
	configPath := flags.String("config", "", "kai-ray scheduler config (YAML)")
	actionList := flags.String("actions", "", "comma-separated actions instead of the config's, or 'none'")
	now := flags.String("now", "", "the session's clock, RFC 3339 (default: the wall clock)")
	writeZip := flags.String("write-zip", "", "write KAI's /get-snapshot ZIP of this cluster and config")
	batch := flags.Bool("batch", false, "read requests as JSON lines on stdin, answer one line each")
	verbosity := flags.Int("v", 0, "KAI's log verbosity (logs go to stderr)")
	output := flags.String("o", "json", "output format (json only)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	// The fake clients' watch channels hold DefaultChanSize events; KAI's status updates for a
	// big session overflow the default and the fake watcher panics.
	watch.DefaultChanSize = 1 << 20
	if err := log.InitLoggers(*verbosity); err != nil {
		fail("oracle: logger: %v", err)
	}
	actions.InitDefaultActions()
	plugins.InitDefaultPlugins()

	if *batch {
		serveBatch()
		return
	}
	if *snapshotPath == "" || *output != "json" {
		fail("oracle: --snapshot FILE is required (or --batch); -o json is the only output")
	}
	req := request{File: *snapshotPath, Actions: *actionList, Now: *now, WriteZip: *writeZip}
	if *configPath != "" {
		text, err := os.ReadFile(*configPath)
		if err != nil {
			fail("oracle: %v", err)
		}
		if req.Config, err = yaml.YAMLToJSON(text); err != nil {
			fail("oracle: %s: %v", *configPath, err)
		}
	}
	result, err := handle(req)
	if err != nil {
		fail("oracle: %v", err)
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", " ")
	_ = encoder.Encode(result)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func serveBatch() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<30)
	writer := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(writer)
	for scanner.Scan() {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var req request
		var resp response
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			resp.Error = fmt.Sprintf("bad request line: %v", err)
		} else {
			resp.ID = req.ID
			result, err := handle(req)
			if err != nil {
				resp.Error = err.Error()
			}
			resp.Result = result
		}
		_ = encoder.Encode(resp)
		_ = writer.Flush()
	}
	if err := scanner.Err(); err != nil {
		fail("oracle: reading requests: %v", err)
	}
}

// handle runs one request: load, optionally write the ZIP, run the session.
func handle(req request) (*outcome, error) {
	if err := applyFixes(req.Fixes); err != nil {
		return nil, err
	}
	data := []byte(req.Snapshot)
	var text string
	if req.File != "" {
		var err error
		if data, err = os.ReadFile(req.File); err != nil {
			return nil, err
		}
	} else if json.Unmarshal(req.Snapshot, &text) == nil {
		data = []byte(text)
	}
	var raw *snapshot.RawKubernetesObjects
	var setup *kaiSetup
	var err error
	if isZip(data) {
		var snap *snapshot.Snapshot
		if snap, err = readZip(data); err != nil {
			return nil, err
		}
		raw = snap.RawObjects
		if setup, err = setupFromZip(snap.Config, snap.SchedulerParams, req.Actions); err != nil {
			return nil, err
		}
	} else {
		if raw, err = decodeList(data); err != nil {
			return nil, err
		}
		config, err := parseRayConfig(req.Config)
		if err != nil {
			return nil, err
		}
		if setup, err = kaiSetupFor(config, req.Actions); err != nil {
			return nil, err
		}
	}
	var clock *time.Time
	if req.Now != "" {
		parsed, err := time.Parse(time.RFC3339, req.Now)
		if err != nil {
			return nil, fmt.Errorf("now: %v", err)
		}
		clock = &parsed
	}
	if req.WriteZip != "" {
		if err := writeSnapshotZip(raw, setup, req.WriteZip); err != nil {
			return nil, err
		}
	}
	objects := copyObjects(raw)
	alignClock(objects, clock)
	s, err := openSession(objects, setup)
	if err != nil {
		return nil, err
	}
	defer s.close()
	return s.run(objects, setup.Actions)
}

// writeSnapshotZip serves /get-snapshot from a session on the unshifted cluster, so the
// ZIP holds the cluster as given and replays with the same --now.
func writeSnapshotZip(raw *snapshot.RawKubernetesObjects, setup *kaiSetup, path string) error {
	s, err := openSession(copyObjects(raw), setup)
	if err != nil {
		return err
	}
	defer s.close()
	data, err := s.snapshotZip()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
