package main

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type fixtureProvider struct{ version string }

type providerModel struct {
	Label types.String `tfsdk:"label"`
}

func newProvider(version string) func() provider.Provider {
	return func() provider.Provider { return &fixtureProvider{version: version} }
}

func (p *fixtureProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "fixture"
	resp.Version = p.version
}

func (p *fixtureProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A provider for tests: values, files and sleeps, nothing remote.",
		Attributes: map[string]schema.Attribute{
			"label": schema.StringAttribute{
				Optional:    true,
				Description: "Copied into fixture_value's provider_label, to show which provider configuration ran.",
			},
		},
	}
}

// providerData is what Configure hands each resource and data source.
type providerData struct {
	label   string
	version string
}

func (p *fixtureProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	data := &providerData{label: cfg.Label.ValueString(), version: p.version}
	resp.ResourceData = data
	resp.DataSourceData = data
}

func (p *fixtureProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newValueResource, newFileResource}
}

func (p *fixtureProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newSleepDataSource}
}
