package main

import "errors"

type brokerMeshCreateCmd struct{}

func (c *brokerMeshCreateCmd) Run() error { return errors.New("not implemented yet") }

type brokerInviteCmd struct{}

func (c *brokerInviteCmd) Run() error { return errors.New("not implemented yet") }

type joinCmd struct{}

func (c *joinCmd) Run() error { return errors.New("not implemented yet") }
