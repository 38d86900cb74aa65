// Command kstatus runs, on an AtlantisDeployment, the status logic that GitOps tools run, as
// those tools' own libraries: the real kstatus (sigs.k8s.io/cli-utils), Flux's wait
// (github.com/fluxcd/pkg/ssa, as kustomize-controller calls it for `wait: true`) and a Lua
// health script in gopher-lua with the libraries Argo CD gives its scripts. Test-only
// (test/gitops-status.test.ts); never part of the product.
//
//	kstatus kstatus <object.json>
//	kstatus flux-wait --kubeconfig K --namespace N --name X --timeout T [--interval 5s] [--fail-fast]
//	kstatus argo-health <script.lua> <object.json>
//
// Each prints one JSON line; exit 0 when it ran (flux-wait: when the object became Current),
// 1 when flux-wait failed or timed out, 2 on a usage or I/O error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	fluxobject "github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "kstatus":
		err = runKstatus(os.Args[2:])
	case "flux-wait":
		err = runFluxWait(os.Args[2:])
	case "argo-health":
		err = runArgoHealth(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kstatus kstatus <object.json> | flux-wait --kubeconfig K --namespace N --name X --timeout T | argo-health <script.lua> <object.json>")
	os.Exit(2)
}

func readObject(file string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return u, nil
}

func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// kstatus: status.Compute, the function kubectl-style tools, cli-utils' applier and Flux call per object.
func runKstatus(args []string) error {
	if len(args) != 1 {
		usage()
	}
	u, err := readObject(args[0])
	if err != nil {
		return err
	}
	res, err := status.Compute(u)
	if err != nil {
		return err
	}
	printJSON(map[string]any{"status": res.Status.String(), "message": res.Message})
	return nil
}

// flux-wait: ResourceManager.WaitForSet on the one object, with kustomize-controller's poll
// interval (5 s) and a status poller built as it builds its own.
func runFluxWait(args []string) error {
	fs := flag.NewFlagSet("flux-wait", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file")
	namespace := fs.String("namespace", "", "namespace of the AtlantisDeployment")
	name := fs.String("name", "", "name of the AtlantisDeployment")
	timeout := fs.Duration("timeout", 5*time.Minute, "the Kustomization's spec.timeout")
	interval := fs.Duration("interval", 5*time.Second, "poll interval (kustomize-controller: 5s)")
	failFast := fs.Bool("fail-fast", false, "kustomize-controller's FailFast feature gate")
	_ = fs.Parse(args)
	if *kubeconfig == "" || *namespace == "" || *name == "" {
		usage()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return err
	}
	poller := polling.NewStatusPoller(c, mapper, polling.Options{})
	rm := ssa.NewResourceManager(c, poller, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	set := fluxobject.ObjMetadataSet{{
		Namespace: *namespace,
		Name:      *name,
		GroupKind: schema.GroupKind{Group: "atlantis-operator.dev", Kind: "AtlantisDeployment"},
	}}
	started := time.Now()
	werr := rm.WaitForSetWithContext(context.Background(), set, ssa.WaitOptions{Interval: *interval, Timeout: *timeout, FailFast: *failFast})
	ended := time.Now()
	out := map[string]any{
		"startedAt":      started.UTC().Format(time.RFC3339Nano),
		"endedAt":        ended.UTC().Format(time.RFC3339Nano),
		"elapsedSeconds": ended.Sub(started).Seconds(),
	}
	if werr != nil {
		out["result"] = "Failed"
		out["error"] = werr.Error()
		printJSON(out)
		os.Exit(1)
	}
	out["result"] = "Current"
	printJSON(out)
	return nil
}

// Argo CD gives health scripts the package, base and table libraries (and a reduced os one,
// which our script does not use, so it is left out: a script that calls os fails here), a
// 1 s budget, and the object as the global `obj`; the returned table's status must be one of
// these, else Argo CD shows Unknown.
var argoHealthCodes = map[string]bool{"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true}

func runArgoHealth(args []string) error {
	if len(args) != 2 {
		usage()
	}
	script, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	u, err := readObject(args[1])
	if err != nil {
		return err
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", toLua(L, u.Object))
	if err := L.DoString(string(script)); err != nil {
		return fmt.Errorf("lua: %w", err)
	}
	ret := L.Get(-1)
	tbl, ok := ret.(*lua.LTable)
	if !ok {
		return fmt.Errorf("the script returned a %s, not a table", ret.Type())
	}
	// As Argo CD does: the table through JSON into {status, message}.
	b, err := json.Marshal(fromLua(tbl))
	if err != nil {
		return err
	}
	var hs struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &hs); err != nil {
		return fmt.Errorf("the returned table is not {status, message}: %w", err)
	}
	if !argoHealthCodes[hs.Status] {
		hs = struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		}{"Unknown", "Lua returned an invalid health status"}
	}
	printJSON(map[string]any{"status": hs.Status, "message": hs.Message})
	return nil
}

// toLua turns decoded JSON into Lua values: objects and arrays into tables (arrays from 1).
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	default:
		return lua.LString(fmt.Sprint(x))
	}
}

// fromLua turns a returned Lua value back into JSON-able Go values (string-keyed tables only).
func fromLua(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LBool:
		return bool(x)
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return float64(x)
	case *lua.LTable:
		m := map[string]any{}
		x.ForEach(func(k, e lua.LValue) { m[k.String()] = fromLua(e) })
		return m
	default:
		return nil
	}
}
