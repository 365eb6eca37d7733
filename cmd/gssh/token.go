package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gssh/gssh/service"
	"github.com/gssh/gssh/units"
)

func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke tokens for gssh serve's HTTP API",
		Long: `Tokens let a laptop or a script use gssh serve's HTTP API (gssh serve
--listen) as you: a request carrying one (Authorization: Bearer TOKEN) is
made as its user, with that user's rights. docs/api.md.`,
		Example: `  gssh token create --name laptop > ~/.config/gssh/token
  gssh token list
  gssh token revoke 0a1b2c3d`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE:        func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newTokenCreateCmd(a, nil), newTokenListCmd(a, nil), newTokenRevokeCmd(a, nil))
	return cmd
}

type tokenCreateOptions struct {
	user, name, expires string
	json                bool
}

func newTokenCreateCmd(a *app, runF func(*tokenCreateOptions) error) *cobra.Command {
	opts := &tokenCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create [--name NAME] [--expires 90d] [--user USER]",
		Short: "Make a token: it is printed once, alone on stdout",
		Long: `Make a token for gssh serve's HTTP API and print it, alone on stdout
(what else is said goes to stderr): it is shown this once, and gssh keeps
only its SHA-256. It lasts --expires (90d; never: no end). A lab's admins
make tokens for other users with --user.`,
		Example: `  gssh token create --name laptop > ~/.config/gssh/token
  gssh token create --name ci --expires 30d
  gssh token create --user alice --name notebook     # a lab admin, for alice`,
		Annotations: exits(usageExit, stateExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return tokenCreateRun(c.Context(), a, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.name, "name", "", "what the token is for (laptop, ci)")
	fl.StringVar(&opts.expires, "expires", "90d", "how long it lasts: 90d, 2w, 12h; never")
	fl.StringVar(&opts.user, "user", "", "the user it acts as (lab admins; default: you)")
	fl.BoolVar(&opts.json, "json", false, "print the token and its record as JSON")
	return cmd
}

// tokenCreateRun is gssh token create; see newTokenCreateCmd.
func tokenCreateRun(ctx context.Context, a *app, opts *tokenCreateOptions) error {
	r := service.TokenRequest{User: opts.user, Name: opts.name}
	switch e := strings.TrimSpace(opts.expires); {
	case strings.EqualFold(e, "never"):
		r.Expires = -1
	default:
		d, err := units.ParseAge(e)
		if err != nil {
			return fmt.Errorf("--expires: %w; or never", err)
		}
		r.Expires = d
	}
	res, err := a.service().CreateToken(ctx, r)
	if err != nil {
		return interrupted(ctx, err)
	}
	if opts.json {
		return a.printJSON(res)
	}
	fmt.Fprintln(a.stdout, res.Token)
	fmt.Fprintf(a.stderr, "gssh: token %s of %s, %s: shown this once; keep it as a password (gssh token revoke %s ends it)\n",
		res.Info.ID, res.Info.User, expiryWords(res.Info.Expires), res.Info.ID)
	return nil
}

// expiryWords says when a token ends: "expires 2027-03-04", "never
// expires".
func expiryWords(t time.Time) string {
	if t.IsZero() {
		return "never expires"
	}
	return "expires " + t.Local().Format("2006-01-02 15:04")
}

type tokenListOptions struct{ json bool }

func newTokenListCmd(a *app, runF func(*tokenListOptions) error) *cobra.Command {
	opts := &tokenListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your tokens (a lab admin: everyone's), never the tokens themselves",
		Example: `  gssh token list
  gssh token list --json`,
		Annotations: exits(usageExit, stateExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return tokenListRun(c.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the list as JSON (schema gssh.tokens/v1)")
	return cmd
}

// tokenListRun is gssh token list; see newTokenListCmd.
func tokenListRun(ctx context.Context, a *app, opts *tokenListOptions) error {
	doc, err := a.service().Tokens(ctx)
	if err != nil {
		return interrupted(ctx, err)
	}
	if opts.json {
		return a.printJSON(doc)
	}
	now := a.now()
	rows := [][]string{}
	for _, t := range doc.Tokens {
		exp := "never"
		switch {
		case t.Expires.IsZero():
		case !now.Before(t.Expires):
			exp = "expired " + t.Expires.Local().Format("2006-01-02")
		default:
			exp = t.Expires.Local().Format("2006-01-02 15:04")
		}
		rows = append(rows, []string{t.ID, t.User, dash(printable(t.Name)), t.Created.Local().Format("2006-01-02 15:04"), exp, dash(t.By)})
	}
	return printTable(a.stdout, a.tty, []string{"ID", "USER", "NAME", "CREATED", "EXPIRES", "BY"}, rows)
}

type tokenRevokeOptions struct{ ids []string }

func newTokenRevokeCmd(a *app, runF func(*tokenRevokeOptions) error) *cobra.Command {
	opts := &tokenRevokeOptions{}
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke tokens: requests carrying them are refused from now on",
		Example: `  gssh token revoke 0a1b2c3d
  gssh token revoke 0a1b2c3d 11223344`,
		Annotations: exits(usageExit, stateExit),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("give the ids of the tokens to revoke (gssh token list shows them)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.ids = args
			if runF != nil {
				return runF(opts)
			}
			return tokenRevokeRun(c.Context(), a, opts)
		},
	}
}

// tokenRevokeRun is gssh token revoke; see newTokenRevokeCmd.
func tokenRevokeRun(ctx context.Context, a *app, opts *tokenRevokeOptions) error {
	gone, err := a.service().RevokeTokens(ctx, opts.ids)
	for _, t := range gone {
		fmt.Fprintf(a.stdout, "token %s of %s revoked\n", t.ID, t.User)
	}
	return interrupted(ctx, err)
}
