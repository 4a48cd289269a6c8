// Command venusgen writes the data perflab's venus-mesa decoder walks Venus command streams
// with: the argument layout of every Vulkan command and structure, in Venus's encoding, derived
// from the Vulkan registry (vk.xml) plus the two Venus registry additions
// (VK_EXT_command_serialization.xml, VK_MESA_venus_protocol.xml), and the command names of
// VkCommandTypeEXT from the published enum (vn_protocol_driver_defines.h).
//
//	go run ./internal/cmd/venusgen -xml DIR -defines FILE -o protocol/protocols
//
// DIR holds vk.xml and the two Venus XML files (venus-protocol's xmls/ folder). It writes
// venus-mesa.layout and the commands of venus-mesa.json. docs/protocol-spec.md, "venus-mesa",
// describes the layout language and the encoding rules it follows.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	xmlDir := flag.String("xml", "", "folder with vk.xml, VK_EXT_command_serialization.xml and VK_MESA_venus_protocol.xml")
	defines := flag.String("defines", "", "vn_protocol_driver_defines.h, or an excerpt holding its VkCommandTypeEXT enum")
	out := flag.String("o", "protocol/protocols", "output folder")
	flag.Parse()
	if *xmlDir == "" || *defines == "" {
		fmt.Fprintln(os.Stderr, "venusgen: -xml and -defines are required")
		os.Exit(2)
	}
	if err := run(*xmlDir, *defines, *out); err != nil {
		fmt.Fprintln(os.Stderr, "venusgen:", err)
		os.Exit(1)
	}
}

func run(xmlDir, defines, out string) error {
	reg := newRegistry()
	for _, f := range []string{"vk.xml", "VK_EXT_command_serialization.xml", "VK_MESA_venus_protocol.xml"} {
		if err := reg.load(filepath.Join(xmlDir, f)); err != nil {
			return err
		}
	}
	reg.resolve()
	b, err := os.ReadFile(defines)
	if err != nil {
		return fmt.Errorf("read defines: %w", err)
	}
	cmds, err := ParseCommandTypes(string(b))
	if err != nil {
		return err
	}
	layout, err := reg.layout(cmds)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "venus-mesa.layout"), layout, 0o644); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	return writeSpecCommands(filepath.Join(out, "venus-mesa.json"), cmds)
}
