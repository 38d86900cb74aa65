package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// fixture_value holds a value in state, like terraform_data but from a downloaded provider;
// sleep_ms makes its create and update take that long (cut short when terraform stops the
// provider, as on an interrupt).
type valueResource struct{ data *providerData }

type valueModel struct {
	ID            types.String `tfsdk:"id"`
	Value         types.String `tfsdk:"value"`
	Keepers       types.Map    `tfsdk:"keepers"`
	SleepMs       types.Int64  `tfsdk:"sleep_ms"`
	Output        types.String `tfsdk:"output"`
	ProviderLabel types.String `tfsdk:"provider_label"`
}

func newValueResource() resource.Resource { return &valueResource{} }

func (r *valueResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_value"
}

func (r *valueResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Holds a value in state. Changing keepers replaces it; changing value updates it in place.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"value": schema.StringAttribute{Optional: true},
			"keepers": schema.MapAttribute{
				ElementType:   types.StringType,
				Optional:      true,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
			},
			"sleep_ms":       schema.Int64Attribute{Optional: true, Description: "Milliseconds that create and update take."},
			"output":         schema.StringAttribute{Computed: true, Description: "The value, once applied."},
			"provider_label": schema.StringAttribute{Computed: true},
		},
	}
}

func (r *valueResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if d, ok := req.ProviderData.(*providerData); ok {
		r.data = d
	}
}

func (r *valueResource) apply(ctx context.Context, m *valueModel) error {
	if err := sleepFor(ctx, m.SleepMs.ValueInt64()); err != nil {
		return err
	}
	m.Output = m.Value
	label := ""
	if r.data != nil {
		label = r.data.label
	}
	m.ProviderLabel = types.StringValue(label)
	return nil
}

func (r *valueResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m valueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	m.ID = types.StringValue(hex.EncodeToString(id))
	if err := r.apply(ctx, &m); err != nil {
		resp.Diagnostics.AddError("fixture_value: create interrupted", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *valueResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m valueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *valueResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m valueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.apply(ctx, &m); err != nil {
		resp.Diagnostics.AddError("fixture_value: update interrupted", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *valueResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// sleepFor waits ms milliseconds, or less when ctx ends (terraform stopping the provider).
// With FIXTURE_SLEEP_STARTED_FILE set, it first appends a line to that file: terraform prints
// "Creating..." before it calls the provider, so a test that must interrupt a sleep already
// under way waits for this mark instead.
func sleepFor(ctx context.Context, ms int64) error {
	if ms <= 0 {
		return nil
	}
	if mark := os.Getenv("FIXTURE_SLEEP_STARTED_FILE"); mark != "" {
		f, err := os.OpenFile(mark, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(f, "sleeping %d ms\n", ms)
		_ = f.Close()
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopped after less than %d ms: %w", ms, ctx.Err())
	}
}
