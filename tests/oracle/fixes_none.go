//go:build !kaifixes

package main

import "fmt"

// applyFixes: KAI as released has no fixes to turn on.
func applyFixes(names []string) error {
	if len(names) > 0 {
		return fmt.Errorf("fixes %v asked of KAI as released; they need the oracle built with -tags kaifixes", names)
	}
	return nil
}
