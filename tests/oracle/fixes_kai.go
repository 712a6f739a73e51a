//go:build kaifixes

package main

import (
	"fmt"

	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/common/solvers"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/actions/common/solvers/accumulated_scenario_filters"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/node_info"
	"github.com/NVIDIA/KAI-scheduler/pkg/scheduler/api/podgroup_info"
)

// The fixes this build can turn on, by the names the Python side uses (kai_fixes.py).
var kaiFixes = map[string]*bool{
	"recorded-job-nodes": &solvers.FixRecordedJobNodes,
	"moved-share":        &node_info.FixMovedShare,
	"evicted-pipelined":  &node_info.FixEvictedPipelined,
	"pipelined-on-idle":  &node_info.FixPipelinedOnIdle,
	"nil-scenario":       &accumulated_scenario_filters.FixNilScenario,
	"tasks-cache":        &podgroup_info.FixTasksCache,
}

// applyFixes turns on exactly the named fixes for the next session.
func applyFixes(names []string) error {
	for _, flag := range kaiFixes {
		*flag = false
	}
	for _, name := range names {
		flag, known := kaiFixes[name]
		if !known {
			return fmt.Errorf("unknown KAI fix %q", name)
		}
		*flag = true
	}
	node_info.ResetOracleFixes()
	return nil
}
