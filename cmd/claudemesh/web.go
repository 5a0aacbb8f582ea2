package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// webCmd is `claudemesh web`: a one-time link to the daemon's web view
// (POST /v1/web/login), opened in the browser or printed.
type webCmd struct {
	NoOpen bool `name:"no-open" help:"Print the link instead of opening it in a browser."`
}

func (c *webCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	client := ipc.NewClient(paths.Socket())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := client.Daemon(ctx)
	if err != nil {
		return err
	}
	if err := d.Require("web", "claudemesh web"); err != nil {
		return err
	}
	login, err := client.WebLogin(ctx)
	if err != nil {
		return err
	}
	if !c.NoOpen {
		if err := openBrowser(login.URL); err == nil {
			fmt.Fprintln(os.Stderr, "opened the web view in your browser; if nothing appeared, open this link (once, before "+
				stamp(login.ExpiresAt)+"):")
		} else {
			fmt.Fprintln(os.Stderr, "no browser could be started ("+err.Error()+"); open this link (once, before "+stamp(login.ExpiresAt)+"):")
		}
	}
	fmt.Println(login.URL)
	return nil
}

// openBrowser starts the desktop's browser on url, without waiting for it.
func openBrowser(url string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, url)
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}
