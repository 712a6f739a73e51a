package main

// kai-ray's scheduler config (DESIGN.md 5.4, a SchedulingShard-like mapping) turned into
// what KAI's scheduler runs with: the plugin tiers KAI's operator writes for a shard and
// the scheduler's command-line parameters.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/conf"
)

var allActions = []string{"allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"}

// rayConfig holds the kai-ray config fields that change KAI's decisions. Fields that only
// steer kai-ray's own machinery (shards, search budgets, backoff across sessions) are read
// and ignored.
type rayConfig struct {
	SchedulerName     string   `json:"schedulerName"`
	Actions           []string `json:"actions"`
	PlacementStrategy struct {
		GPU       string `json:"gpu"`
		CPU       string `json:"cpu"`
		GPUDevice string `json:"gpuDevice"`
	} `json:"placementStrategy"`
	KValue                        *float64                  `json:"kValue"`
	DefaultStalenessGracePeriod   json.RawMessage           `json:"defaultStalenessGracePeriod"`
	MaxConsolidationPreemptees    *int                      `json:"maxConsolidationPreemptees"`
	AllowConsolidatingReclaim     *bool                     `json:"allowConsolidatingReclaim"`
	ReclaimerSaturationMultiplier *float64                  `json:"reclaimerSaturationMultiplier"`
	UseSchedulingSignatures       *bool                     `json:"useSchedulingSignatures"`
	DefaultPreemptMinRuntime      json.RawMessage           `json:"defaultPreemptMinRuntime"`
	DefaultReclaimMinRuntime      json.RawMessage           `json:"defaultReclaimMinRuntime"`
	Plugins                       map[string]pluginOverride `json:"plugins"`
}

// pluginOverride is a SchedulingShard's per-plugin setting (arguments are kai-ray's own fields).
type pluginOverride struct {
	Enabled  *bool `json:"enabled"`
	Priority *int  `json:"priority"`
}

// defaultPluginPriorities are KAI's operator's (SchedulingShard setDefaultPlugins): higher first.
var defaultPluginPriorities = map[string]int{
	"predicates": 1900, "proportion": 1800, "priority": 1700, "nodeavailability": 1600,
	"resourcetype": 1500, "podaffinity": 1400, "elastic": 1300, "kubeflow": 1200, "ray": 1100,
	"subgrouporder": 1000, "taskorder": 900, "nominatednode": 800, "dynamicresources": 700,
	"minruntime": 600, "topology": 500, "snapshot": 400, "gpupack": 300, "gpuspread": 300,
	"nodeplacement": 200, "gpusharingorder": 100,
}

// withOverrides drops the plugins the config turns off and orders the rest as KAI's operator
// does (resolvePlugins): by priority, highest first, then by name.
func withOverrides(plugins []conf.PluginOption, overrides map[string]pluginOverride) []conf.PluginOption {
	priority := func(name string) int {
		if override, found := overrides[name]; found && override.Priority != nil {
			return *override.Priority
		}
		return defaultPluginPriorities[name]
	}
	var kept []conf.PluginOption
	for _, plugin := range plugins {
		if override, found := overrides[plugin.Name]; found && override.Enabled != nil && !*override.Enabled {
			continue
		}
		kept = append(kept, plugin)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		pi, pj := priority(kept[i].Name), priority(kept[j].Name)
		if pi != pj {
			return pi > pj
		}
		return kept[i].Name < kept[j].Name
	})
	return kept
}

// kaiSetup is one session's configuration as KAI takes it.
type kaiSetup struct {
	Config  *conf.SchedulerConfiguration
	Params  *conf.SchedulerParams
	Actions []string
}

func parseRayConfig(data []byte) (*rayConfig, error) {
	config := &rayConfig{}
	if len(strings.TrimSpace(string(data))) == 0 || string(data) == "null" {
		return config, nil
	}
	if err := json.Unmarshal(data, config); err != nil {
		return nil, fmt.Errorf("config: %v", err)
	}
	return config, nil
}

// duration reads a Go duration string ("60s") or a number of seconds.
func duration(raw json.RawMessage, fallback time.Duration, field string) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return fallback, nil
	}
	var seconds float64
	if err := json.Unmarshal(raw, &seconds); err == nil {
		return time.Duration(seconds * float64(time.Second)), nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return 0, fmt.Errorf("config: %s: not a duration", field)
	}
	parsed, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("config: %s: %v", field, err)
	}
	return parsed, nil
}

func orDefault[T any](value *T, fallback T) T {
	if value == nil {
		return fallback
	}
	return *value
}

func strategy(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}

// kaiSetupFor builds KAI's configuration; actionsOverride ("" = the config's, "none" = no
// action) plays the role of `kai-ray schedule --actions`.
func kaiSetupFor(config *rayConfig, actionsOverride string) (*kaiSetup, error) {
	gpu := strategy(config.PlacementStrategy.GPU, "binpack")
	cpu := strategy(config.PlacementStrategy.CPU, "binpack")
	gpuDevice := config.PlacementStrategy.GPUDevice
	if gpuDevice == "" {
		gpuDevice = map[bool]string{true: "pack", false: "spread"}[gpu == "binpack"]
	}
	actions := config.Actions
	if actions == nil {
		actions = allActions
	}
	if actionsOverride != "" {
		actions = nil
		if strings.TrimSpace(actionsOverride) != "none" {
			for _, name := range strings.Split(actionsOverride, ",") {
				if name = strings.TrimSpace(name); name != "" {
					actions = append(actions, name)
				}
			}
		}
	}
	spread := gpu == "spread" || cpu == "spread"
	var kept []string
	for _, name := range actions {
		known := false
		for _, candidate := range allActions {
			known = known || candidate == name
		}
		if !known {
			return nil, fmt.Errorf("unknown action %q", name)
		}
		if !(spread && name == "consolidation") { // KAI's operator drops consolidation with spread
			kept = append(kept, name)
		}
	}

	grace, err := duration(config.DefaultStalenessGracePeriod, 60*time.Second, "defaultStalenessGracePeriod")
	if err != nil {
		return nil, err
	}
	minRuntime := map[string]string{}
	for field, raw := range map[string]json.RawMessage{
		"defaultPreemptMinRuntime": config.DefaultPreemptMinRuntime,
		"defaultReclaimMinRuntime": config.DefaultReclaimMinRuntime,
	} {
		value, err := duration(raw, 0, field)
		if err != nil {
			return nil, err
		}
		if value != 0 {
			minRuntime[field] = value.String()
		}
	}
	proportion := map[string]string{
		"kValue": strconv.FormatFloat(orDefault(config.KValue, 1.0), 'f', -1, 64),
		"relcaimerSaturationMultiplier": strconv.FormatFloat( // KAI's spelling
			orDefault(config.ReclaimerSaturationMultiplier, 1.0), 'f', -1, 64),
	}
	if len(minRuntime) == 0 {
		minRuntime = nil
	}

	// The order of KAI's operator (resources_for_shard.go): order functions are compared
	// plugin by plugin in this order, node scores are summed.
	plugins := []conf.PluginOption{
		{Name: "predicates"},
		{Name: "proportion", Arguments: proportion},
		{Name: "priority"},
		{Name: "nodeavailability"},
		{Name: "resourcetype"},
		{Name: "podaffinity"},
		{Name: "elastic"},
		{Name: "kubeflow"},
		{Name: "ray"},
		{Name: "subgrouporder"},
		{Name: "taskorder"},
		{Name: "nominatednode"},
		{Name: "dynamicresources"},
		{Name: "minruntime", Arguments: minRuntime},
		{Name: "topology"},
		{Name: "snapshot"},
		{Name: "gpu" + gpuDevice},
		{Name: "nodeplacement", Arguments: map[string]string{"gpu": gpu, "cpu": cpu}},
	}
	if gpu == "binpack" {
		plugins = append(plugins, conf.PluginOption{Name: "gpusharingorder"})
	}
	plugins = withOverrides(plugins, config.Plugins)
	schedulerName := strategy(config.SchedulerName, "kai-scheduler")
	return &kaiSetup{
		Config: &conf.SchedulerConfiguration{
			Actions: strings.Join(kept, ", "),
			Tiers:   []conf.Tier{{Plugins: plugins}},
		},
		Params: &conf.SchedulerParams{
			SchedulerName:                     schedulerName,
			PartitionParams:                   &conf.SchedulingNodePoolParams{},
			MaxNumberConsolidationPreemptees:  orDefault(config.MaxConsolidationPreemptees, 16),
			UseSchedulingSignatures:           orDefault(config.UseSchedulingSignatures, true),
			FullHierarchyFairness:             true,
			AllowConsolidatingReclaim:         orDefault(config.AllowConsolidatingReclaim, true),
			NumOfStatusRecordingWorkers:       1,
			GlobalDefaultStalenessGracePeriod: grace,
			SchedulePeriod:                    time.Second,
		},
		Actions: kept,
	}, nil
}

// setupFromZip is the configuration a /get-snapshot ZIP carries, as KAI's snapshot tool
// replays it; actionsOverride replaces its action list.
func setupFromZip(config *conf.SchedulerConfiguration, params *conf.SchedulerParams,
	actionsOverride string) (*kaiSetup, error) {
	if config == nil || params == nil {
		return nil, fmt.Errorf("the ZIP has no config or no schedulerParams")
	}
	if params.PartitionParams == nil {
		params.PartitionParams = &conf.SchedulingNodePoolParams{}
	}
	text := config.Actions
	if actionsOverride != "" {
		text = actionsOverride
		if strings.TrimSpace(text) == "none" {
			text = ""
		}
	}
	var actions []string
	for _, name := range strings.Split(text, ",") {
		if name = strings.TrimSpace(name); name != "" {
			actions = append(actions, name)
		}
	}
	return &kaiSetup{Config: config, Params: params, Actions: actions}, nil
}
