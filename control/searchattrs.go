package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/sluicecdc/sluice/workflows"
)

// SearchAttributeCommands are the Temporal CLI commands that register the search attributes in
// namespace: what `sluice setup-temporal` does, for users who prefer the CLI.
func SearchAttributeCommands(namespace string) string {
	var b strings.Builder
	for _, k := range workflows.SearchAttributes {
		fmt.Fprintf(&b, "temporal operator search-attribute create --namespace %s --name %s --type Keyword\n", namespace, k.GetName())
	}
	return b.String()
}

// MissingSearchAttributes returns the names of Sluice's search attributes namespace lacks. One
// registered with another type than Keyword is an error naming it: the workflows cannot upsert it.
func MissingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("listing the search attributes of Temporal namespace %s: %w", namespace, err)
	}
	var missing []string
	for _, k := range workflows.SearchAttributes {
		typ, ok := resp.GetCustomAttributes()[k.GetName()]
		switch {
		case !ok:
			missing = append(missing, k.GetName())
		case typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD:
			return nil, fmt.Errorf("search attribute %s of Temporal namespace %s is registered as %s, Sluice needs Keyword; "+
				"remove it (`temporal operator search-attribute remove --namespace %s --name %s`) and run `sluice setup-temporal`",
				k.GetName(), namespace, typ, namespace, k.GetName())
		}
	}
	return missing, nil
}

// RegisterSearchAttributes adds the search attributes namespace lacks and returns their names
// (none when all were there). It is idempotent: attributes already registered are left alone,
// and one another caller added meanwhile counts as registered.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	missing, err := MissingSearchAttributes(ctx, c, namespace)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return nil, fmt.Errorf("adding search attributes %s to Temporal namespace %s (the Temporal CLI equivalent:\n%s): %w",
			strings.Join(missing, ", "), namespace, SearchAttributeCommands(namespace), err)
	}
	// The server registers them asynchronously on some persistence stores: read them back.
	still, err := MissingSearchAttributes(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	if len(still) > 0 {
		return nil, fmt.Errorf("search attributes %s of Temporal namespace %s are still missing after adding them", strings.Join(still, ", "), namespace)
	}
	return missing, nil
}
