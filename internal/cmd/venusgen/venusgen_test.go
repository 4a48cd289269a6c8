package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// registrySnippet is a few vk.xml definitions, as the registry spells them.
const registrySnippet = `<registry>
<types>
  <type category="basetype">typedef <type>uint32_t</type> <name>VkFlags</name>;</type>
  <type category="basetype">typedef <type>uint64_t</type> <name>VkDeviceSize</name>;</type>
  <type category="handle"><type>VK_DEFINE_HANDLE</type>(<name>VkDevice</name>)</type>
  <type category="handle"><type>VK_DEFINE_NON_DISPATCHABLE_HANDLE</type>(<name>VkBuffer</name>)</type>
  <type category="bitmask">typedef <type>VkFlags</type> <name>VkBufferCreateFlags</name>;</type>
  <type name="VkStructureType" category="enum"/>
  <type category="struct" name="VkBufferCreateInfo">
    <member values="VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO"><type>VkStructureType</type> <name>sType</name></member>
    <member optional="true">const <type>void</type>*     <name>pNext</name></member>
    <member optional="true"><type>VkBufferCreateFlags</type> <name>flags</name></member>
    <member><type>VkDeviceSize</type>           <name>size</name></member>
    <member optional="true"><type>uint32_t</type> <name>queueFamilyIndexCount</name></member>
    <member len="queueFamilyIndexCount">const <type>uint32_t</type>* <name>pQueueFamilyIndices</name></member>
  </type>
  <type category="struct" name="VkMemoryRequirements" returnedonly="true">
    <member><type>VkDeviceSize</type> <name>size</name></member>
    <member><type>uint32_t</type> <name>memoryTypeBits</name></member>
  </type>
  <type category="struct" name="VkNamed">
    <member><type>char</type> <name>name</name>[<enum>VK_MAX_NAME</enum>]</member>
    <member><type>uint32_t</type> <name>count</name></member>
    <member><type>VkMemoryRequirements</type> <name>reqs</name>[4]</member>
  </type>
</types>
<enums name="VkStructureType" type="enum">
  <enum value="12" name="VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO"/>
</enums>
<commands>
  <command>
    <proto><type>VkResult</type> <name>vkCreateBuffer</name></proto>
    <param><type>VkDevice</type> <name>device</name></param>
    <param>const <type>VkBufferCreateInfo</type>* <name>pCreateInfo</name></param>
    <param optional="true">const <type>VkAllocationCallbacks</type>* <name>pAllocator</name></param>
    <param><type>VkBuffer</type>* <name>pBuffer</name></param>
  </command>
  <command>
    <proto><type>void</type> <name>vkGetBufferMemoryRequirements</name></proto>
    <param><type>VkDevice</type> <name>device</name></param>
    <param><type>VkBuffer</type> <name>buffer</name></param>
    <param><type>VkMemoryRequirements</type>* <name>pMemoryRequirements</name></param>
  </command>
  <command>
    <proto><type>VkResult</type> <name>vkEnumerateNames</name></proto>
    <param><type>uint32_t</type>* <name>pCount</name></param>
    <param len="pCount"><type>VkNamed</type>* <name>pNames</name></param>
  </command>
</commands>
</registry>`

func TestLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vk.xml")
	if err := os.WriteFile(path, []byte(registrySnippet), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRegistry()
	if err := r.load(path); err != nil {
		t.Fatal(err)
	}
	r.resolve()
	cmds, err := ParseCommandTypes(`VK_COMMAND_TYPE_vkCreateBuffer_EXT = 50,
    VK_COMMAND_TYPE_vkGetBufferMemoryRequirements_EXT = 30,
    VK_COMMAND_TYPE_vkEnumerateNames_EXT = 7,
    VK_COMMAND_TYPE_vkEnumerateNamesKHR_EXT = 7,`)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 || cmds[0].Name != "vkEnumerateNames" || cmds[2].ID != 50 {
		t.Fatalf("command types %v", cmds)
	}
	b, err := r.layout(cmds)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// sType 12; flags, size, count, array of u32 | partial: the pointer's count, its size word
		"S\tVkBufferCreateInfo\t12\t484a(4)\t48\n",
		"S\tVkMemoryRequirements\t-\t84\t-\n",
		// a char array is bytes; a fixed array's count is not sent in an output struct
		"S\tVkNamed\t-\tb4a(T(VkMemoryRequirements))\ta(P(VkMemoryRequirements))\n",
		"C\t50\tvkCreateBuffer\t8p(T(VkBufferCreateInfo))p()p(8)\n",
		"C\t30\tvkGetBufferMemoryRequirements\t88p(P(VkMemoryRequirements))\n",
		"C\t7\tvkEnumerateNames\tp(4)a(P(VkNamed))\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("layout lacks %q:\n%s", want, b)
		}
	}
}
