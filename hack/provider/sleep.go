package main

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// data "fixture_sleep" takes `milliseconds` to read, so a plan (and a refresh) lasts as long
// as a bench wants; it passes `input` through to `output` so other resources can depend on it.
type sleepDataSource struct{}

type sleepModel struct {
	ID           types.String `tfsdk:"id"`
	Milliseconds types.Int64  `tfsdk:"milliseconds"`
	Input        types.String `tfsdk:"input"`
	Output       types.String `tfsdk:"output"`
	SleptMs      types.Int64  `tfsdk:"slept_ms"`
}

func newSleepDataSource() datasource.DataSource { return &sleepDataSource{} }

func (d *sleepDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sleep"
}

func (d *sleepDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Sleeps while it is read (cut short when terraform stops the provider).",
		Attributes: map[string]schema.Attribute{
			"id":           schema.StringAttribute{Computed: true},
			"milliseconds": schema.Int64Attribute{Required: true},
			"input":        schema.StringAttribute{Optional: true},
			"output":       schema.StringAttribute{Computed: true},
			"slept_ms":     schema.Int64Attribute{Computed: true, Description: "How long the read really slept."},
		},
	}
}

func (d *sleepDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m sleepModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	start := time.Now()
	if err := sleepFor(ctx, m.Milliseconds.ValueInt64()); err != nil {
		resp.Diagnostics.AddError("fixture_sleep: interrupted", err.Error())
		return
	}
	m.ID = types.StringValue("sleep")
	m.Output = m.Input
	m.SleptMs = types.Int64Value(time.Since(start).Milliseconds())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
