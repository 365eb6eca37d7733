package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"al.essio.dev/pkg/shellescape"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TemplatesSchema is the schema name of the templates file.
const TemplatesSchema = "gssh.templates/v1"

// templates is the templates file (~/.config/gssh/templates.json): a
// user's saved gssh submit flags and commands, by name. Templates are a
// person's own, as shell aliases are: they live with the user, not in
// the queue's state.
type templates struct {
	Schema    string              `json:"schema"`
	Templates map[string]template `json:"templates"`
}

// template is one saved job: the submit flags given (each flag with its
// values in order: a repeatable one, such as --env, has several) and the
// command ("": none, gssh submit --template gives it).
type template struct {
	Flags   [][2]string `json:"flags"`
	Command []string    `json:"command,omitempty"`
	Saved   time.Time   `json:"saved_at"`
}

// templatePath is the templates file.
func (a *app) templatePath() string {
	return filepath.Join(a.home(), ".config", "gssh", "templates.json")
}

// loadTemplates reads the templates file; none is an empty set.
func (a *app) loadTemplates() (templates, error) {
	t := templates{Schema: TemplatesSchema, Templates: map[string]template{}}
	path := a.templatePath()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil || t.Schema != TemplatesSchema {
		return t, fmt.Errorf("%s: not a gssh templates file (%v): move it away, and save the templates again", path, cmpErr(err, "schema "+t.Schema))
	}
	if t.Templates == nil {
		t.Templates = map[string]template{}
	}
	return t, nil
}

func cmpErr(err error, other string) string {
	if err != nil {
		return err.Error()
	}
	return other
}

// saveTemplates writes the templates file, 0600, through a new file
// renamed in place.
func (a *app) saveTemplates(t templates) error {
	path := a.templatePath()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".templates-*.json") // 0600
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// templateName accepts what a file name and a shell word can hold.
var templateName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

func newTemplateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Save gssh submit's flags and command under a name, to submit again with --template",
		Long: `Templates are jobs you submit again and again: gssh template save NAME takes
gssh submit's flags and, after --, the command, and keeps them in
~/.config/gssh/templates.json (yours alone). gssh submit --template NAME
starts from them: flags given beside it win, and a command given replaces
the template's.`,
		Example: `  gssh template save train --gpus 2 --mem 20G --timeout 12h -- python train.py
  gssh submit --template train --priority 3
  gssh template list`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE:        func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newTemplateSaveCmd(a), newTemplateListCmd(a), newTemplateShowCmd(a), newTemplateDeleteCmd(a))
	return cmd
}

func newTemplateSaveCmd(a *app) *cobra.Command {
	opts := &submitOptions{}
	cmd := &cobra.Command{
		Use:   "save NAME [submit flags] [-- CMD [ARGS...]]",
		Short: "Save submit flags and a command as template NAME (replacing one of that name)",
		Long: `Save gssh submit's flags and the command (the words after --; none: each
gssh submit --template gives it) as template NAME: letters, digits, '.',
'_' and '-'. The flags are checked as gssh submit checks them.`,
		Example: `  gssh template save train --gpus 2 --mem 20G -- python train.py
  gssh template save big --gpus 8 --timeout 2-00:00:00 --label a100`,
		Annotations: exits(usageExit),
		Args:        cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			name := args[0]
			if !templateName.MatchString(name) {
				return fmt.Errorf("template name %q: use letters, digits, '.', '_' and '-' (at most 64)", name)
			}
			opts.argv = args[1:]
			if err := checkMemFlags(c, opts); err != nil {
				return err
			}
			// Checked as a submit would check them (a command to check
			// with, where the template has none).
			check := *opts
			if len(check.argv) == 0 {
				check.argv = []string{"true"}
			}
			check.environ = a.environ
			if _, err := check.request(func(string) {}, a.now()); err != nil {
				return err
			}
			t := template{Command: opts.argv, Saved: a.now().UTC().Truncate(time.Second)}
			c.Flags().Visit(func(f *pflag.Flag) {
				if sv, ok := f.Value.(pflag.SliceValue); ok {
					for _, v := range sv.GetSlice() {
						t.Flags = append(t.Flags, [2]string{f.Name, v})
					}
					return
				}
				t.Flags = append(t.Flags, [2]string{f.Name, f.Value.String()})
			})
			all, err := a.loadTemplates()
			if err != nil {
				return err
			}
			_, replaced := all.Templates[name]
			all.Templates[name] = t
			if err := a.saveTemplates(all); err != nil {
				return err
			}
			verb := "saved"
			if replaced {
				verb = "replaced"
			}
			fmt.Fprintf(a.stdout, "template %s %s: gssh submit --template %s\n", name, verb, name)
			return nil
		},
	}
	fl := cmd.Flags()
	// NAME comes first, the flags after it: interspersed, up to the --
	// that starts the command (whose own flags stay its own).
	addJobFlags(fl, opts)
	addQueueFlags(fl, opts)
	return cmd
}

func newTemplateListCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List your templates: NAME, FLAGS, COMMAND, SAVED",
		Example: `  gssh template list
  gssh template list --json | jq '.templates | keys'`,
		Annotations: exits(usageExit),
		Args:        cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			all, err := a.loadTemplates()
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(all)
			}
			names := slices.Sorted(maps.Keys(all.Templates))
			rows := make([][]string, 0, len(names))
			for _, n := range names {
				t := all.Templates[n]
				rows = append(rows, []string{n, dash(strings.Join(flagWords(t.Flags), " ")), dash(shellescape.QuoteCommand(t.Command)), timeCell(t.Saved)})
			}
			return printTable(a.stdout, a.tty, []string{"NAME", "FLAGS", "COMMAND", "SAVED"}, rows)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the templates file's document ("+TemplatesSchema+")")
	return cmd
}

func newTemplateShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print a template as the gssh submit command line it stands for",
		Example: `  gssh template show train
  gssh template show train >> notes.txt      # the submit line, to keep`,
		Annotations: exits(usageExit),
		Args:        cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := a.templateNamed(args[0])
			if err != nil {
				return err
			}
			line := append([]string{"gssh", "submit"}, flagWords(t.Flags)...)
			if len(t.Command) > 0 {
				line = append(line, "--", shellescape.QuoteCommand(t.Command))
			}
			fmt.Fprintln(a.stdout, strings.Join(line, " "))
			return nil
		},
	}
}

func newTemplateDeleteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete templates",
		Example: `  gssh template delete train
  gssh template delete old1 old2`,
		Annotations: exits(usageExit),
		Args:        cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			all, err := a.loadTemplates()
			if err != nil {
				return err
			}
			for _, n := range args {
				if _, ok := all.Templates[n]; !ok {
					return fmt.Errorf("template %q: no such template (gssh template list shows them); nothing was deleted", n)
				}
			}
			for _, n := range args {
				delete(all.Templates, n)
			}
			if err := a.saveTemplates(all); err != nil {
				return err
			}
			for _, n := range args {
				fmt.Fprintf(a.stdout, "template %s deleted\n", n)
			}
			return nil
		},
	}
}

// templateNamed is the template of that name, or an error saying which
// there are.
func (a *app) templateNamed(name string) (template, error) {
	all, err := a.loadTemplates()
	if err != nil {
		return template{}, err
	}
	t, ok := all.Templates[name]
	if !ok {
		have := slices.Sorted(maps.Keys(all.Templates))
		if len(have) == 0 {
			return t, fmt.Errorf("template %q: you have no templates (gssh template save %s [flags] -- CMD makes one)", name, name)
		}
		return t, fmt.Errorf("template %q: no such template; yours are: %s", name, strings.Join(have, ", "))
	}
	return t, nil
}

// applyTemplate puts template opts.template under gssh submit's flags: a
// flag c was given keeps its value, every other one the template gives
// takes the template's; without a command, the template's is the job's.
func applyTemplate(a *app, c *cobra.Command, opts *submitOptions) error {
	t, err := a.templateNamed(opts.template)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	c.Flags().Visit(func(f *pflag.Flag) { given[f.Name] = true })
	for _, fv := range t.Flags {
		if given[fv[0]] {
			continue
		}
		if err := c.Flags().Set(fv[0], fv[1]); err != nil {
			return fmt.Errorf("template %s: --%s %q: %w (save it again)", opts.template, fv[0], fv[1], err)
		}
	}
	if len(opts.argv) == 0 {
		if len(t.Command) == 0 {
			return fmt.Errorf("template %s has no command: give it after --", opts.template)
		}
		opts.argv = t.Command
	}
	return nil
}

// flagWords are flags as command-line words, quoted for a shell.
func flagWords(flags [][2]string) []string {
	var out []string
	for _, fv := range flags {
		out = append(out, "--"+fv[0]+"="+shellescape.Quote(fv[1]))
	}
	return out
}
