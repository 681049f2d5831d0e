package node

import (
	"encoding/hex"
	"fmt"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/nova-node/nova-node/discovery/invite"
)

// ApplyInvite writes an invite token into the data dir's config.yaml (swarm,
// swarm secret, bootstrap peers added to those already there), keeping the
// file's comments. The data dir is created if needed. A running node must be
// restarted to use it.
func ApplyInvite(dataDir string, tok invite.Token) error {
	if err := tok.Validate(); err != nil {
		return err
	}
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	if _, err := EnsureDataDir(cfg); err != nil {
		return err
	}
	return editConfig(dataDir, func(c *Config, set func(key string, v any)) {
		set("swarm", tok.Swarm)
		if len(tok.Secret) > 0 {
			set("swarmSecret", hex.EncodeToString(tok.Secret))
		} else {
			set("swarmSecret", "")
		}
		boot := c.Bootstrap
		for _, a := range append(tok.Bootstrap, tok.Relays...) {
			if !slices.Contains(boot, a) {
				boot = append(boot, a)
			}
		}
		set("bootstrap", boot)
		relays := c.Relays
		for _, a := range tok.Relays {
			if !slices.Contains(relays, a) {
				relays = append(relays, a)
			}
		}
		set("relays", relays)
	})
}

// SetSwarmSecret writes a swarm secret (hex) into config.yaml.
func SetSwarmSecret(dataDir string, secret []byte) error {
	return editConfig(dataDir, func(_ *Config, set func(string, any)) {
		set("swarmSecret", hex.EncodeToString(secret))
	})
}

// editConfig changes top-level keys of config.yaml through its node tree,
// so comments and the order of the file survive, and checks the result.
func editConfig(dataDir string, f func(c *Config, set func(key string, v any))) error {
	path := ConfigPath(dataDir)
	def := DefaultConfig()
	def.DataDir = dataDir
	if err := writeConfigTemplate(def); err != nil { // only when there is none
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("node: read %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("node: %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("node: %s is not a YAML mapping", path)
	}
	cur := DefaultConfig()
	cur.DataDir = dataDir
	if err := ParseConfig(b, &cur); err != nil {
		return err
	}
	var setErr error
	set := func(key string, v any) {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			setErr = err
			return
		}
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				n.HeadComment = root.Content[i+1].HeadComment
				root.Content[i+1] = &n
				return
			}
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &n)
	}
	f(&cur, set)
	if setErr != nil {
		return setErr
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	check := DefaultConfig()
	check.DataDir = dataDir
	if err := ParseConfig(out, &check); err != nil {
		return err
	}
	if err := check.Validate(); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
