package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// loadRulesFlag reads the rules file named by flag --name.
func loadRulesFlag(name, path string) (*normalize.RuleSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	defer f.Close()
	rules, err := normalize.LoadRules(f)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %w", name, path, err)
	}
	return rules, nil
}

// loadTypesFlag reads the column types file named by flag --name ("":
// none).
func loadTypesFlag(name, path string) (cdc.TypeMap, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	var types cdc.TypeMap
	if err := json.Unmarshal(data, &types); err != nil {
		return nil, fmt.Errorf("--%s %s: %w", name, path, err)
	}
	return types, nil
}
