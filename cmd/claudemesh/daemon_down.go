package main

import "errors"

type daemonDownCmd struct{}

func (c *daemonDownCmd) Run() error { return errors.New("not implemented yet") }

type daemonStatusCmd struct{}

func (c *daemonStatusCmd) Run() error { return errors.New("not implemented yet") }

type daemonAcceptHostCmd struct{}

func (c *daemonAcceptHostCmd) Run() error { return errors.New("not implemented yet") }
