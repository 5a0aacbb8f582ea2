package main

import "errors"

type daemonInstallServiceCmd struct{}

func (c *daemonInstallServiceCmd) Run() error { return errors.New("not implemented yet") }

type daemonUninstallServiceCmd struct{}

func (c *daemonUninstallServiceCmd) Run() error { return errors.New("not implemented yet") }
