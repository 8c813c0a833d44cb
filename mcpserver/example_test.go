package mcpserver_test

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-sandbox/dsh-sandbox/mcpserver"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/executor"
	"github.com/dsh-sandbox/dsh-sandbox/sandbox/modes"
)

// A harness mounts the server on a transport (here the SDK's in-memory
// one) and a client calls the sandboxed bash tool through it.
func ExampleNew() {
	ws, _ := os.MkdirTemp("", "example-ws")
	defer os.RemoveAll(ws)
	srv, err := mcpserver.New(mcpserver.Options{Config: executor.Config{Mode: modes.WorkspaceWrite, Workspace: ws}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close(context.Background()) // kills every live task tree

	ctx := context.Background()
	clientSide, serverSide := mcp.NewInMemoryTransports()
	if _, err := srv.MCP().Connect(ctx, serverSide, nil); err != nil {
		fmt.Println(err)
		return
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, clientSide, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()

	tools, _ := cs.ListTools(ctx, nil)
	for _, t := range tools.Tools {
		fmt.Println(t.Name)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": "echo hi > note.txt && cat note.txt", "description": "Write and read a note",
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text, res.IsError)
	// Output:
	// bash
	// task_kill
	// task_list
	// task_output
	// hi false
}
